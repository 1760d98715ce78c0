package provisioner_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// TestIntegrationReleases checks what a cluster admin sees of the Helm
// releases behind BundleDeployments, and that one BundleDeployment never
// takes over objects that are not its own.
func TestIntegrationReleases(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()

	releases := func(name string) map[string]string {
		t.Helper()
		list := &corev1.SecretList{}
		if err := h.c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{"owner": "helm", "name": name}); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, s := range list.Items {
			got[s.Labels["version"]] = s.Labels["status"]
		}
		return got
	}

	v1 := h.pushBundle("rel-v1", map[string]string{"manifests/cm.yaml": configMap("rel-a", "1")})
	if err := h.c.Create(ctx, newBD("rel", v1)); err != nil {
		t.Fatal(err)
	}
	h.waitBD("rel", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	if got := releases("rel"); fmt.Sprint(got) != "map[1:deployed]" {
		t.Errorf("release records after install: %v", got)
	}
	cm, err := h.getCM("rel-a")
	if err != nil {
		t.Fatal(err)
	}
	if cm.Annotations["meta.helm.sh/release-name"] != "rel" || cm.Labels["app.kubernetes.io/managed-by"] != "Helm" {
		t.Errorf("installed object lacks Helm's ownership metadata: %v %v", cm.Labels, cm.Annotations)
	}

	v2 := h.pushBundle("rel-v2", map[string]string{"manifests/cm.yaml": configMap("rel-a", "2")})
	h.updateBD("rel", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = v2 })
	eventually(t, "the upgrade", func() error {
		if got := releases("rel"); fmt.Sprint(got) != "map[1:superseded 2:deployed]" {
			return fmt.Errorf("release records %v", got)
		}
		return nil
	})

	t.Run("another bundle deployment cannot take over installed objects", func(t *testing.T) {
		thief := h.pushBundle("thief", map[string]string{"manifests/cm.yaml": configMap("rel-a", "stolen")})
		if err := h.c.Create(ctx, newBD("thief", thief)); err != nil {
			t.Fatal(err)
		}
		h.waitBD("thief", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInstallFailed, "ConfigMap default/rel-a exists and is not managed by this release")
		if cm, _ := h.getCM("rel-a"); cm.Data["value"] != "2" {
			t.Errorf("the other bundle deployment's object was changed: %v", cm.Data)
		}
	})

	t.Run("an object created by someone else is not taken over", func(t *testing.T) {
		mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "admins-own", Namespace: "default"}, Data: map[string]string{"value": "mine"}}
		if err := h.c.Create(ctx, mine); err != nil {
			t.Fatal(err)
		}
		src := h.pushBundle("squatter", map[string]string{"manifests/cm.yaml": configMap("admins-own", "theirs")})
		if err := h.c.Create(ctx, newBD("squatter", src)); err != nil {
			t.Fatal(err)
		}
		h.waitBD("squatter", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInstallFailed, "ConfigMap default/admins-own exists and is not managed by this release")
		if cm, _ := h.getCM("admins-own"); cm.Data["value"] != "mine" {
			t.Errorf("an unmanaged object was changed: %v", cm.Data)
		}
	})
}
