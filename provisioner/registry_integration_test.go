package provisioner_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
)

// TestIntegrationRegistryBundles installs a real registry+v1 bundle
// (etcd-0.9.4 from community-operators) both ways a cluster admin can: a
// BundleDeployment of the registry class, and one of the plain class whose
// template has the registry class.
func TestIntegrationRegistryBundles(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	dir := filepath.Join(testenv.RepoRoot(), "test/testdata/bundles/registry-v1/etcd-0.9.4")
	h.reg.MustPush(t, h.reg.Ref("etcd:v0.9.4"), testregistry.Image(t, testregistry.LayerFromDir(t, dir, "")))
	src := rukpakv1alpha1.BundleSource{
		Type:  rukpakv1alpha1.SourceTypeImage,
		Image: &rukpakv1alpha1.ImageSource{Ref: h.reg.Ref("etcd:v0.9.4"), CertificateData: string(h.reg.CAPEM)},
	}

	cases := []struct {
		name, bdClass, installNS string
		// preexisting namespaces are used, never taken over or deleted.
		preexisting bool
	}{
		{"registry-class", rukpakv1alpha1.ProvisionerClassRegistry, "etcd-system", false},
		{"plain-class", rukpakv1alpha1.ProvisionerClassPlain, "etcd-plain", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.preexisting {
				if err := h.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tc.installNS}}); err != nil {
					t.Fatal(err)
				}
			}
			bd := newBD("etcd-"+tc.name, src)
			bd.Spec.ProvisionerClassName = tc.bdClass
			bd.Spec.Template.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
			if tc.installNS != "etcd-system" {
				// The second install goes to its own namespace: OwnNamespace
				// mode selected through spec.config.
				bd.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(`{"installNamespace":"` + tc.installNS + `","watchNamespaces":["` + tc.installNS + `"]}`)}
			}
			if err := h.c.Create(ctx, bd); err != nil {
				t.Fatal(err)
			}
			h.waitBD(bd.Name, rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")

			dep := &appsv1.Deployment{}
			if err := h.c.Get(ctx, client.ObjectKey{Namespace: tc.installNS, Name: "etcd-operator"}, dep); err != nil {
				t.Fatalf("operator deployment: %v", err)
			}
			if dep.Labels[rukpakv1alpha1.LabelOwnerName] != bd.Name {
				t.Errorf("deployment owner labels: %v", dep.Labels)
			}
			if got := dep.Spec.Template.Annotations["olm.targetNamespaces"]; got != tc.installNS {
				t.Errorf("olm.targetNamespaces = %q, want %q", got, tc.installNS)
			}
			if err := h.c.Get(ctx, client.ObjectKey{Namespace: tc.installNS, Name: "etcd-operator"}, &corev1.ServiceAccount{}); err != nil {
				t.Errorf("service account: %v", err)
			}
			roles := &rbacv1.RoleList{}
			if err := h.c.List(ctx, roles, client.InNamespace(tc.installNS), client.MatchingLabels{rukpakv1alpha1.LabelOwnerName: bd.Name}); err != nil || len(roles.Items) == 0 {
				t.Errorf("roles from permissions: %d, %v", len(roles.Items), err)
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := h.c.Get(ctx, client.ObjectKey{Name: "etcdclusters.etcd.database.coreos.com"}, crd); err != nil {
				t.Errorf("CRD: %v", err)
			}

			// The CRDs are cluster-wide: one install of the operator at a
			// time. Uninstalling removes them, once their storage is up: a
			// CRD deleted while it still initialises (here: deleted by the
			// case before, created again moments ago) meets the API
			// server's cleanup backoff, which can pass eventually's two
			// minutes on a loaded machine (see waitCRDStorage).
			installed := &apiextensionsv1.CustomResourceDefinitionList{}
			if err := h.c.List(ctx, installed, client.MatchingLabels{rukpakv1alpha1.LabelOwnerName: bd.Name}); err != nil || len(installed.Items) == 0 {
				t.Fatalf("CRDs labelled as installed by %s: %d, %v", bd.Name, len(installed.Items), err)
			}
			names := make([]string, 0, len(installed.Items))
			for _, c := range installed.Items {
				names = append(names, c.Name)
			}
			h.waitCRDStorage(names...)
			if err := h.c.Delete(ctx, bd); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the CRDs to be uninstalled", func() error {
				err := h.c.Get(ctx, client.ObjectKeyFromObject(crd), crd)
				if apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("CRD still there: %w", err)
			})
			ns := &corev1.Namespace{}
			err := h.c.Get(ctx, client.ObjectKey{Name: tc.installNS}, ns)
			switch {
			case tc.preexisting && (err != nil || !ns.DeletionTimestamp.IsZero()):
				t.Errorf("a namespace this install did not create was deleted: %v", err)
			case !tc.preexisting && err == nil && ns.DeletionTimestamp.IsZero():
				t.Errorf("the namespace this install created was not deleted")
			}
		})
	}

	t.Run("a bundle that cannot be installed in the requested mode says why", func(t *testing.T) {
		bd := newBD("etcd-all", src)
		bd.Spec.Template.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
		bd.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(`{"watchNamespaces":[""]}`)}
		if err := h.c.Create(ctx, bd); err != nil {
			t.Fatal(err)
		}
		h.waitBD(bd.Name, rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonBundleLoadFailed, "does not support install mode AllNamespaces")
	})
}
