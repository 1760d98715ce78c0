package provisioner_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/provisioner"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/metrics"
)

// requestReconcile asks for a reconcile of BundleDeployment name and waits
// until it has been handled.
func (h *harness) requestReconcile(name, value string) {
	h.t.Helper()
	h.updateBD(name, func(bd *rukpakv1alpha1.BundleDeployment) {
		metav1.SetMetaDataAnnotation(&bd.ObjectMeta, rukpakv1alpha1.AnnotationReconcileRequestedAt, value)
	})
	eventually(h.t, "reconcile request "+value+" handled", func() error {
		if got := h.bd(name).Status.LastHandledReconcileAt; got != value {
			return fmt.Errorf("last handled reconcile request %q", got)
		}
		return nil
	})
}

// stepsSince is how often each reconcile step ran since before.
func stepsSince(before map[string]float64) map[string]float64 {
	now := metrics.Steps()
	for k, v := range before {
		now[k] -= v
	}
	return now
}

// pushEtcd pushes the real registry+v1 bundle etcd-0.9.4 and returns its
// source.
func (h *harness) pushEtcd() rukpakv1alpha1.BundleSource {
	h.t.Helper()
	dir := filepath.Join(testenv.RepoRoot(), "test/testdata/bundles/registry-v1/etcd-0.9.4")
	h.reg.MustPush(h.t, h.reg.Ref("etcd:v0.9.4"), testregistry.Image(h.t, testregistry.LayerFromDir(h.t, dir, "")))
	return rukpakv1alpha1.BundleSource{
		Type:  rukpakv1alpha1.SourceTypeImage,
		Image: &rukpakv1alpha1.ImageSource{Ref: h.reg.Ref("etcd:v0.9.4"), CertificateData: string(h.reg.CAPEM)},
	}
}

// TestIntegrationUnchangedReconcileRepeatsNothing proves that a reconcile
// whose inputs did not change loads, decodes, renders, reads release
// records and compares CRDs not at all (counted by the process's
// rukpak_reconcile_steps_total), while drift is corrected exactly as
// before: an edited Role and a deleted ServiceAccount are restored with no
// step run. A changed spec.config decodes, renders and reads the history
// again. A real registry+v1 bundle (etcd-0.9.4, with CRDs) installed with a
// config, so the conversion runs too.
func TestIntegrationUnchangedReconcileRepeatsNothing(t *testing.T) {
	// Not parallel: it counts the steps of every reconcile in the process.
	h := newHarness(t)
	ctx := context.Background()
	h.createNamespace("memo-a")
	bd := newBD("memo", h.pushEtcd())
	bd.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	bd.Spec.Template.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	bd.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(`{"installNamespace":"memo-a","watchNamespaces":["memo-a"]}`)}
	if err := h.c.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}
	h.waitBD(bd.Name, rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	// The first unchanged reconcile whose release records the informer
	// already shows notes what it found; one that runs before the record
	// written by the install shows there renders once more. Settled when a
	// reconcile runs no step.
	settled := false
	for i := 0; i < 5 && !settled; i++ {
		before := metrics.Steps()
		h.requestReconcile(bd.Name, fmt.Sprintf("settle-%d", i))
		settled = allZero(stepsSince(before))
	}
	if !settled {
		t.Fatalf("five reconciles of an unchanged BundleDeployment each ran steps")
	}

	before := metrics.Steps()
	h.requestReconcile(bd.Name, "unchanged-1")
	h.requestReconcile(bd.Name, "unchanged-2")
	if got := stepsSince(before); !allZero(got) {
		t.Errorf("two reconciles of an unchanged BundleDeployment ran steps: %v", got)
	}

	// Drift: still corrected, still without any step.
	role := h.installedRole(bd.Name, "memo-a")
	role.Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}
	if err := h.c.Update(ctx, role); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "memo-a", Name: "etcd-operator"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the edited Role and the deleted ServiceAccount restored", func() error {
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: "memo-a", Name: "etcd-operator"}, &corev1.ServiceAccount{}); err != nil {
			return fmt.Errorf("service account: %w", err)
		}
		got := &rbacv1.Role{}
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(role), got); err != nil {
			return err
		}
		if len(got.Rules) == 1 && len(got.Rules[0].Resources) == 1 && got.Rules[0].Resources[0] == "pods" && got.Rules[0].Verbs[0] == "get" {
			return fmt.Errorf("role %s still has the edited rules", role.Name)
		}
		return nil
	})
	if got := stepsSince(before); !allZero(got) {
		t.Errorf("restoring drifted objects of an unchanged BundleDeployment ran steps: %v", got)
	}

	// A changed config: decoded (converted), rendered and recorded again.
	h.createNamespace("memo-b")
	before = metrics.Steps()
	h.updateBD(bd.Name, func(bd *rukpakv1alpha1.BundleDeployment) {
		bd.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(`{"installNamespace":"memo-a","watchNamespaces":["memo-b"]}`)}
	})
	eventually(t, "the new config installed", func() error {
		bd := h.bd(bd.Name)
		c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled)
		if c == nil || c.ObservedGeneration != bd.Generation || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("installed: %v", c)
		}
		return nil
	})
	got := stepsSince(before)
	for _, step := range []string{metrics.StepDecode, metrics.StepRender, metrics.StepHistory} {
		if got[step] == 0 {
			t.Errorf("a changed config did not run step %s: %v", step, got)
		}
	}
}

// TestIntegrationObjectCacheBound installs, with a small object cache, a
// bundle whose objects are more than a quarter of it: it installs as any
// other, is never kept (every reconcile decodes it again) and evicts
// nothing (a small bundle installed first stays cached: its reconciles
// decode nothing).
func TestIntegrationObjectCacheBound(t *testing.T) {
	// Not parallel: it counts the steps of every reconcile in the process.
	const bound = 256 << 10
	h := newHarnessWith(t, func(o *provisioner.Options) { o.ObjectCacheBytes = bound })
	ctx := context.Background()

	small := h.pushBundle("memo-small", map[string]string{"manifests/cm.yaml": configMap("memo-small", "v")})
	if err := h.c.Create(ctx, newBD("memo-small", small)); err != nil {
		t.Fatal(err)
	}
	h.waitBD("memo-small", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")

	// ~600 KiB of ConfigMap values, over a quarter of 256 KiB however
	// they are counted.
	files := map[string]string{}
	for i := range 12 {
		files[fmt.Sprintf("manifests/big-%02d.yaml", i)] = configMap(fmt.Sprintf("memo-big-%02d", i), strings.Repeat("x", 50<<10))
	}
	big := h.pushBundle("memo-big", files)
	if err := h.c.Create(ctx, newBD("memo-big", big)); err != nil {
		t.Fatal(err)
	}
	h.waitBD("memo-big", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	for i := range 12 {
		cm, err := h.getCM(fmt.Sprintf("memo-big-%02d", i))
		if err != nil {
			t.Fatal(err)
		}
		if len(cm.Data["value"]) != 50<<10 {
			t.Fatalf("ConfigMap %s holds %d bytes, want %d", cm.Name, len(cm.Data["value"]), 50<<10)
		}
	}

	h.requestReconcile("memo-small", "settle")
	before := metrics.Steps()
	h.requestReconcile("memo-big", "again")
	if got := stepsSince(before); got[metrics.StepLoad] == 0 || got[metrics.StepDecode] == 0 {
		t.Errorf("a bundle over a quarter of the cache was kept (a reconcile neither loaded nor decoded it): %v", got)
	}
	before = metrics.Steps()
	h.requestReconcile("memo-small", "again")
	if got := stepsSince(before); got[metrics.StepLoad] != 0 || got[metrics.StepDecode] != 0 {
		t.Errorf("the small bundle was evicted (its reconcile loaded or decoded it): %v", got)
	}
}

// allZero: no step ran but, perhaps, taking the objects from the object
// cache, which a requested reconcile does (it goes the full way: the
// annotation is one of its inputs).
func allZero(m map[string]float64) bool {
	for step, v := range m {
		if v != 0 && step != metrics.StepCached {
			return false
		}
	}
	return true
}

// installedRole returns a Role BundleDeployment owner installed in ns.
func (h *harness) installedRole(owner, ns string) *rbacv1.Role {
	h.t.Helper()
	roles := &rbacv1.RoleList{}
	if err := h.c.List(context.Background(), roles, client.InNamespace(ns), client.MatchingLabels{rukpakv1alpha1.LabelOwnerName: owner}); err != nil || len(roles.Items) == 0 {
		h.t.Fatalf("roles installed by %s in %s: %d, %v", owner, ns, len(roles.Items), err)
	}
	return &roles.Items[0]
}

// TestIntegrationFirstInstallTakesConvertedObjects proves that the first
// install of a registry+v1 Bundle without spec.config neither loads nor
// decodes its stored content: the objects the conversion rendered when it
// was unpacked are handed to it (counted by rukpak_reconcile_steps_total).
// A reconcile after that takes them from the cache as any other.
func TestIntegrationFirstInstallTakesConvertedObjects(t *testing.T) {
	// Not parallel: it counts the steps of every reconcile in the process.
	h := newHarness(t)
	ctx := context.Background()
	bd := newBD("handed", h.pushEtcd())
	bd.Spec.Template.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	before := metrics.Steps()
	if err := h.c.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}
	h.waitBD(bd.Name, rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	got := stepsSince(before)
	if got[metrics.StepLoad] != 0 || got[metrics.StepDecode] != 0 || got[metrics.StepCached] == 0 {
		t.Errorf("from create to Installed: want the converted objects taken (cached) and nothing loaded or decoded, got %v", got)
	}
	roles := &rbacv1.RoleList{}
	if err := h.c.List(ctx, roles, client.MatchingLabels{rukpakv1alpha1.LabelOwnerName: bd.Name}); err != nil || len(roles.Items) == 0 || len(roles.Items[0].Rules) == 0 {
		t.Errorf("the bundle's roles, installed: %d, %v", len(roles.Items), err)
	}
	before = metrics.Steps()
	h.requestReconcile(bd.Name, "again")
	if got := stepsSince(before); got[metrics.StepLoad] != 0 || got[metrics.StepDecode] != 0 {
		t.Errorf("a reconcile after the install loaded or decoded: %v", got)
	}
}
