package provisioner_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/helm"
	"github.com/rukpak-dev/rukpak/provisioner/identity"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// chartObjects is every object an install of chart dir as release name in
// namespace creates: crds/, the manifest and the hooks.
func chartObjects(t *testing.T, dir, name, namespace string) []*unstructured.Unstructured {
	t.Helper()
	ch, err := helm.LoadChart(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	r, err := helm.Render(context.Background(), ch, nil, helm.RenderOptions{ReleaseName: name, Namespace: namespace})
	if err != nil {
		t.Fatal(err)
	}
	docs := []string{r.Release.Manifest}
	for _, crd := range r.CRDs {
		docs = append(docs, string(crd.File.Data))
	}
	for _, h := range r.Release.Hooks {
		docs = append(docs, h.Manifest)
	}
	objs, err := release.DecodeManifest(strings.Join(docs, "\n---\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" && o.GetNamespace() == "" {
			o.SetNamespace(namespace)
		}
	}
	return objs
}

// A helm-class BundleDeployment naming a ServiceAccount: with part of the
// permissions its chart needs (crds/, manifest and hooks), the condition
// lists exactly the missing rules and nothing is applied; granted what
// identity.RBAC prints for the chart's objects, it installs, upgrades (hooks
// run again) and uninstalls, every ConfigMap write (objects and hooks) made
// as the ServiceAccount (admission policies refuse anyone else), the
// release records still written by the provisioner.
func TestIntegrationHelmServiceAccount(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.tenantInstaller()
	partial := h.createDocs(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: partial, namespace: tenant}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get, create, patch, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: partial, namespace: tenant}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: partial}
subjects: [{kind: ServiceAccount, name: installer, namespace: tenant}]`)

	bd := &rukpakv1alpha1.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "hsa"},
		Spec: rukpakv1alpha1.BundleDeploymentSpec{
			ProvisionerClassName: rukpakv1alpha1.ProvisionerClassHelm,
			ServiceAccount:       &rukpakv1alpha1.ServiceAccountReference{Namespace: "tenant", Name: "installer"},
			Config:               &apiextensionsv1.JSON{Raw: []byte(`{"installNamespace":"tenant"}`)},
			Template: rukpakv1alpha1.BundleTemplate{Spec: rukpakv1alpha1.BundleSpec{
				ProvisionerClassName: rukpakv1alpha1.ProvisionerClassHelm,
				Source:               h.pushChartDir("charts/hsa", hooksChart),
			}},
		},
	}
	if err := h.c.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}

	t.Run("missing rules listed, nothing applied", func(t *testing.T) {
		bd := h.waitBD("hsa", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInsufficientPermissions, "")
		want := fmt.Sprintf(`Service account tenant/installer may not install bundle %q, so nothing was applied. Grant it these rules (checked again every 30s, or at once with the core.rukpak.io/reconcile-requested-at annotation):
cluster-wide (ClusterRole):
- {apiGroups: ["apiextensions.k8s.io"], resources: ["customresourcedefinitions"], verbs: ["create", "delete", "get", "patch"]}
in namespace "tenant" (Role):
- {apiGroups: ["hooks.test.rukpak.io"], resources: ["gadgets"], verbs: ["create", "delete", "get", "patch"]}`, bd.Status.GeneratedBundles[0].Name)
		if got := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled).Message; got != want {
			t.Errorf("Installed message:\n%s\nwant\n%s", got, want)
		}
		if err := h.get(&apiextensionsv1.CustomResourceDefinition{}, "", "gadgets.hooks.test.rukpak.io"); !apierrors.IsNotFound(err) {
			t.Errorf("crds/ CRD: %v, want not found", err)
		}
		for _, name := range []string{"hsa-config", "hsa-hook-first"} {
			if err := h.get(&corev1.ConfigMap{}, "tenant", name); !apierrors.IsNotFound(err) {
				t.Errorf("ConfigMap %s: %v, want not found", name, err)
			}
		}
		if got := h.releaseSecrets("hsa"); len(got) != 0 {
			t.Errorf("release records %v, want none", got)
		}
	})

	t.Run("granted what identity.RBAC prints, it installs as the service account", func(t *testing.T) {
		for _, o := range partial {
			if err := h.c.Delete(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		rbac, err := identity.RBAC(chartObjects(t, hooksChart, "hsa", "tenant"), identity.ServiceAccount{Namespace: "tenant", Name: "installer"}, "installer")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range rbac {
			if err := h.c.Create(ctx, o); err != nil {
				t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
			}
		}
		h.updateBD("hsa", func(bd *rukpakv1alpha1.BundleDeployment) {
			metav1.SetMetaDataAnnotation(&bd.ObjectMeta, rukpakv1alpha1.AnnotationReconcileRequestedAt, "granted")
		})
		h.waitBD("hsa", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
		h.waitHistory("hsa", h.stockHistory, "1:deployed")
		for _, name := range []string{"hsa-config", "hsa-hook-first"} {
			if err := h.get(&corev1.ConfigMap{}, "tenant", name); err != nil {
				t.Errorf("ConfigMap %s: %v", name, err)
			}
		}
	})

	t.Run("upgrade", func(t *testing.T) {
		h.setConfig("hsa", `{"installNamespace":"tenant","values":"message: v2\n"}`)
		h.waitHistory("hsa", h.stockHistory, "1:superseded", "2:deployed")
		cm := &corev1.ConfigMap{}
		if err := h.get(cm, "tenant", "hsa-config"); err != nil || cm.Data["message"] != "v2" {
			t.Fatalf("message %q (%v), want v2", cm.Data["message"], err)
		}
		h.waitBD("hsa", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	})

	t.Run("uninstall", func(t *testing.T) {
		if err := h.c.Delete(ctx, h.bd("hsa")); err != nil {
			t.Fatal(err)
		}
		h.waitGone(&rukpakv1alpha1.BundleDeployment{}, "", "hsa")
		if err := h.get(&corev1.ConfigMap{}, "tenant", "hsa-config"); !apierrors.IsNotFound(err) {
			t.Errorf("hsa-config after uninstall: %v, want not found", err)
		}
		if got := h.releaseSecrets("hsa"); len(got) != 0 {
			t.Errorf("release records %v after uninstall, want none", got)
		}
	})
}
