package provisioner_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner"
)

// The webhook's CRD-check role, kept by the provisioner from the cache of
// installed objects its BundleDeployment reconcilers share, grants list on
// the resources of a CRD a release installs.
func TestIntegrationCRDCheckRoleFromTheInstalledCache(t *testing.T) {
	t.Parallel()
	const role = "rukpak-crd-check-shared-cache"
	h := newHarnessWith(t, func(o *provisioner.Options) { o.CRDCheckClusterRole = role })
	ctx := context.Background()

	src := h.pushBundle("gizmo-v1", map[string]string{"manifests/crd.yaml": gizmoCRD("a, b", 100)})
	if err := h.c.Create(ctx, newBD("gizmos", src)); err != nil {
		t.Fatal(err)
	}
	h.waitBD("gizmos", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	want := rbacv1.PolicyRule{APIGroups: []string{"example.com"}, Resources: []string{"gizmos"}, Verbs: []string{"list"}}
	eventually(t, "the CRD-check role to grant list on gizmos", func() error {
		cr := &rbacv1.ClusterRole{}
		if err := h.c.Get(ctx, client.ObjectKey{Name: role}, cr); err != nil {
			return err
		}
		if !slices.ContainsFunc(cr.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Equal(r.APIGroups, want.APIGroups) && slices.Equal(r.Resources, want.Resources) && slices.Equal(r.Verbs, want.Verbs)
		}) {
			return fmt.Errorf("rules %+v", cr.Rules)
		}
		return nil
	})
}
