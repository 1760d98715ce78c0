package provisioner_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/bundledeployment"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// TestIntegrationGeneratedBundleOwnership plays a user who may create
// Bundles and read BundleDeployments: they compute the name of the Bundle
// a BundleDeployment's first, next or previous template generates and
// create it first, with the BundleDeployment's labels and a controller
// reference to it. The BundleDeployment must install only a Bundle it
// created itself, under another name, and leave theirs alone: not
// installed, not adopted, not deleted.
func TestIntegrationGeneratedBundleOwnership(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()

	// preCreate creates, as the attacker, the Bundle bd would generate for
	// template, with spec; controlled by bd if it exists.
	preCreate := func(t *testing.T, bd string, template rukpakv1alpha1.BundleTemplate, spec rukpakv1alpha1.BundleSpec) *rukpakv1alpha1.Bundle {
		t.Helper()
		hash, err := bundledeployment.TemplateHash(template)
		if err != nil {
			t.Fatal(err)
		}
		b := &rukpakv1alpha1.Bundle{
			ObjectMeta: metav1.ObjectMeta{
				Name: bd + "-" + hash,
				Labels: map[string]string{
					"app":                                  bd,
					rukpakv1alpha1.LabelOwnerKind:          "BundleDeployment",
					rukpakv1alpha1.LabelOwnerName:          bd,
					rukpakv1alpha1.LabelBundleTemplateHash: hash,
				},
			},
			Spec: spec,
		}
		owner := &rukpakv1alpha1.BundleDeployment{}
		if err := h.c.Get(ctx, client.ObjectKey{Name: bd}, owner); err == nil {
			b.OwnerReferences = []metav1.OwnerReference{{
				APIVersion: rukpakv1alpha1.GroupVersion.String(), Kind: "BundleDeployment", Name: bd, UID: owner.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}}
		}
		if err := h.c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		// It is a Bundle of the provisioner's class: it gets unpacked (so
		// the provisioner has seen it before the template changes).
		return h.waitBundle(b.Name, rukpakv1alpha1.PhaseUnpacked, rukpakv1alpha1.ReasonUnpackSuccessful, "")
	}
	template := func(bd string, src rukpakv1alpha1.BundleSource) rukpakv1alpha1.BundleTemplate {
		next := h.bd(bd).Spec.Template.DeepCopy()
		next.Spec.Source = src
		return *next
	}
	// installed waits until bd has installed value into its ConfigMap
	// name from a Bundle it created (not taken's), which it returns.
	installed := func(t *testing.T, bd, cm, value string, taken *rukpakv1alpha1.Bundle) string {
		t.Helper()
		var d *rukpakv1alpha1.BundleDeployment
		var active *rukpakv1alpha1.Bundle
		eventually(t, fmt.Sprintf("%s %s installed from a bundle of the template", cm, value), func() error {
			if got, err := h.getCM(cm); err != nil || got.Data["value"] != value {
				return fmt.Errorf("%s %v: %w", cm, got.Data, err)
			}
			d = h.bd(bd)
			if c := conditions.Get(d.Status.Conditions, rukpakv1alpha1.TypeInstalled); c == nil || c.Status != metav1.ConditionTrue ||
				c.Message != fmt.Sprintf("Instantiated bundle %q successfully", d.Status.ActiveBundle) {
				return fmt.Errorf("installed: %+v, activeBundle %q", c, d.Status.ActiveBundle)
			}
			active = &rukpakv1alpha1.Bundle{}
			if err := h.c.Get(ctx, client.ObjectKey{Name: d.Status.ActiveBundle}, active); err != nil {
				return err
			}
			if !equality.Semantic.DeepEqual(active.Spec, d.Spec.Template.Spec) {
				return fmt.Errorf("active bundle %s is of another template", active.Name)
			}
			return nil
		})
		if active.Name == taken.Name || !metav1.IsControlledBy(active, d) ||
			fmt.Sprint(d.Status.GeneratedBundles) != fmt.Sprintf("[{%s %s}]", active.Name, active.UID) {
			t.Errorf("activeBundle %q, records %v; want a bundle of the bundle deployment's own, not %q", active.Name, d.Status.GeneratedBundles, taken.Name)
		}
		if hash, err := bundledeployment.TemplateHash(d.Spec.Template); err != nil || active.Labels[rukpakv1alpha1.LabelBundleTemplateHash] != hash {
			t.Errorf("bundle %q labels %v, want the template hash %s (%v)", active.Name, active.Labels, hash, err)
		}
		if !strings.HasPrefix(active.Name, bd+"-") || len(active.Name) != len(taken.Name) {
			t.Errorf("bundle name %q, want %s-<6 characters>", active.Name, bd)
		}
		return active.Name
	}
	// untouched checks that taken is still there as its creator left it,
	// recorded nowhere.
	untouched := func(t *testing.T, bd string, taken *rukpakv1alpha1.Bundle) {
		t.Helper()
		got := h.bundle(taken.Name)
		if got.UID != taken.UID || !reflect.DeepEqual(got.Spec, taken.Spec) || !reflect.DeepEqual(got.OwnerReferences, taken.OwnerReferences) {
			t.Errorf("the pre-created bundle %s was replaced or changed: uid %s, spec %+v", taken.Name, got.UID, got.Spec)
		}
		d := h.bd(bd)
		if _, recorded := recordOf(d, taken.Name); recorded || d.Status.ActiveBundle == taken.Name || d.Status.PendingBundle == taken.Name {
			t.Errorf("the pre-created bundle %s is the bundle deployment's: status %+v", taken.Name, d.Status)
		}
	}

	evil := h.pushBundle("evil", map[string]string{"manifests/cm.yaml": configMap("evil", "pwned")})
	evilSpec := rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Source: evil}
	noEvil := func(t *testing.T) {
		t.Helper()
		if _, err := h.getCM("evil"); !apierrors.IsNotFound(err) {
			t.Errorf("a pre-created bundle's content was installed: %v", err)
		}
	}

	t.Run("a pre-created bundle under the first bundle's name is passed over", func(t *testing.T) {
		src := h.pushBundle("first-v1", map[string]string{"manifests/cm.yaml": configMap("first-config", "v1")})
		bd := newBD("first", src)
		taken := preCreate(t, "first", bd.Spec.Template, evilSpec)
		if err := h.c.Create(ctx, bd); err != nil {
			t.Fatal(err)
		}
		installed(t, "first", "first-config", "v1", taken)
		untouched(t, "first", taken)
		noEvil(t)
	})

	v1 := h.pushBundle("own-v1", map[string]string{"manifests/cm.yaml": configMap("own-config", "v1")})
	if err := h.c.Create(ctx, newBD("own", v1)); err != nil {
		t.Fatal(err)
	}
	bd := h.waitBD("own", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	v1Bundle := bd.Status.ActiveBundle
	if got, want := fmt.Sprint(bd.Status.GeneratedBundles), fmt.Sprintf("[{%s %s}]", v1Bundle, h.bundle(v1Bundle).UID); got != want {
		t.Errorf("status.generatedBundles = %s, want %s", got, want)
	}

	t.Run("a pre-created bundle with other content under the next template's name is passed over, and kept", func(t *testing.T) {
		v2 := h.pushBundle("own-v2", map[string]string{"manifests/cm.yaml": configMap("own-config", "v2")})
		taken := preCreate(t, "own", template("own", v2), evilSpec)
		h.updateBD("own", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = v2 })
		installed(t, "own", "own-config", "v2", taken)
		untouched(t, "own", taken)
		noEvil(t)
		eventually(t, "the superseded bundle deleted", func() error {
			if err := h.c.Get(ctx, client.ObjectKey{Name: v1Bundle}, &rukpakv1alpha1.Bundle{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("bundle %s: %w", v1Bundle, err)
			}
			return nil
		})
	})

	t.Run("a pre-created bundle with the template's own spec is not adopted either", func(t *testing.T) {
		v3 := h.pushBundle("own-v3", map[string]string{"manifests/cm.yaml": configMap("own-config", "v3")})
		next := template("own", v3)
		taken := preCreate(t, "own", next, next.Spec)
		h.updateBD("own", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = v3 })
		installed(t, "own", "own-config", "v3", taken)
		untouched(t, "own", taken)
	})

	var rolledBack string
	t.Run("a rollback to a template whose bundle's name was pre-created since its deletion", func(t *testing.T) {
		a := h.pushBundle("roll-a", map[string]string{"manifests/cm.yaml": configMap("roll-config", "a")})
		b := h.pushBundle("roll-b", map[string]string{"manifests/cm.yaml": configMap("roll-config", "b")})
		if err := h.c.Create(ctx, newBD("roll", a)); err != nil {
			t.Fatal(err)
		}
		aTemplate := h.bd("roll").Spec.Template
		aBundle := h.waitBD("roll", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "").Status.ActiveBundle
		h.updateBD("roll", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = b })
		eventually(t, "pivoted to b, a's bundle deleted", func() error {
			if cm, err := h.getCM("roll-config"); err != nil || cm.Data["value"] != "b" {
				return fmt.Errorf("roll-config %v: %w", cm.Data, err)
			}
			if err := h.c.Get(ctx, client.ObjectKey{Name: aBundle}, &rukpakv1alpha1.Bundle{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("bundle %s: %w", aBundle, err)
			}
			return nil
		})
		// a's name is the one the rollback generates first.
		taken := preCreate(t, "roll", aTemplate, evilSpec)
		if taken.Name != aBundle {
			t.Fatalf("pre-created %s, want a's name %s", taken.Name, aBundle)
		}
		h.updateBD("roll", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template = aTemplate })
		rolledBack = installed(t, "roll", "roll-config", "a", taken)
		untouched(t, "roll", taken)
		noEvil(t)
	})

	t.Run("bundles it created under another name are still its own after a restart", func(t *testing.T) {
		if rolledBack == "" {
			t.Skip("no rollback to restart after")
		}
		h.kill()
		h.start()
		h.updateBD("roll", func(bd *rukpakv1alpha1.BundleDeployment) {
			if bd.Annotations == nil {
				bd.Annotations = map[string]string{}
			}
			bd.Annotations[rukpakv1alpha1.AnnotationReconcileRequestedAt] = "after-restart"
		})
		eventually(t, "the request handled", func() error {
			if got := h.bd("roll").Status.LastHandledReconcileAt; got != "after-restart" {
				return fmt.Errorf("lastHandledReconcileAt %q", got)
			}
			return nil
		})
		d := h.waitBD("roll", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, fmt.Sprintf("Instantiated bundle %q", rolledBack))
		if got, want := fmt.Sprint(d.Status.GeneratedBundles), fmt.Sprintf("[{%s %s}]", rolledBack, h.bundle(rolledBack).UID); got != want {
			t.Errorf("status.generatedBundles = %s, want %s", got, want)
		}
		if cm, err := h.getCM("roll-config"); err != nil || cm.Data["value"] != "a" {
			t.Errorf("installed content: %v %v", cm.Data, err)
		}
	})
}

// recordOf finds name in bd's status.generatedBundles.
func recordOf(bd *rukpakv1alpha1.BundleDeployment, name string) (rukpakv1alpha1.GeneratedBundle, bool) {
	for _, g := range bd.Status.GeneratedBundles {
		if g.Name == name {
			return g, true
		}
	}
	return rukpakv1alpha1.GeneratedBundle{}, false
}

// TestIntegrationObjectOwnership checks that a BundleDeployment never takes
// back, by drift correction or an upgrade, an object another release owns
// now, never deletes one on uninstall, and never installs into the
// provisioner's namespace.
func TestIntegrationObjectOwnership(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()

	t.Run("drift correction does not take back an object another release installed since", func(t *testing.T) {
		src := h.pushBundle("first", map[string]string{"manifests/cm.yaml": configMap("shared", "first") + "---\n" + configMap("first-only", "first")})
		if err := h.c.Create(ctx, newBD("first", src)); err != nil {
			t.Fatal(err)
		}
		h.waitBD("first", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")

		// While first's provisioner is down, its object is deleted and
		// another release installs its own under the name, as the
		// provisioner does for a BundleDeployment "second".
		h.kill()
		shared, err := h.getCM("shared")
		if err != nil {
			t.Fatal(err)
		}
		if err := h.c.Delete(ctx, shared); err != nil {
			t.Fatal(err)
		}
		m, err := release.NewManager(h.env.Config, namespace)
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "shared", "namespace": "default"},
			"data":     map[string]any{"value": "second"},
		}}
		if _, err := m.Apply(ctx, "second", []*unstructured.Unstructured{obj}, func(o *unstructured.Unstructured) {
			o.SetLabels(map[string]string{rukpakv1alpha1.LabelOwnerKind: "BundleDeployment", rukpakv1alpha1.LabelOwnerName: "second"})
		}); err != nil {
			t.Fatal(err)
		}
		h.start()

		want := "Not taking back objects that another release owns now (delete them or remove them from one of the bundles): ConfigMap default/shared is owned by release rukpak-system/second"
		h.waitBD("first", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInstallFailed, want)
		if cm, err := h.getCM("shared"); err != nil || cm.Data["value"] != "second" || cm.Labels[rukpakv1alpha1.LabelOwnerName] != "second" {
			t.Errorf("the other release's object was taken: %v %v %v", cm.Labels, cm.Data, err)
		}

		// first's own objects are still corrected, shared still not.
		own, _ := h.getCM("first-only")
		own.Data["value"] = "tampered"
		if err := h.c.Update(ctx, own); err != nil {
			t.Fatal(err)
		}
		eventually(t, "first-only restored", func() error {
			if cm, err := h.getCM("first-only"); err != nil || cm.Data["value"] != "first" {
				return fmt.Errorf("first-only %v: %w", cm.Data, err)
			}
			return nil
		})
		if cm, err := h.getCM("shared"); err != nil || cm.Data["value"] != "second" {
			t.Errorf("the other release's object was taken: %v %v", cm.Data, err)
		}

		t.Run("and uninstalling leaves it alone", func(t *testing.T) {
			if err := h.c.Delete(ctx, h.bd("first")); err != nil {
				t.Fatal(err)
			}
			eventually(t, "first gone", func() error {
				err := h.c.Get(ctx, client.ObjectKey{Name: "first"}, &rukpakv1alpha1.BundleDeployment{})
				if apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("still there: %w", err)
			})
			if _, err := h.getCM("first-only"); !apierrors.IsNotFound(err) {
				t.Errorf("first's own object was not deleted: %v", err)
			}
			if cm, err := h.getCM("shared"); err != nil || cm.Data["value"] != "second" {
				t.Errorf("the uninstall deleted or changed the other release's object: %v %v", cm.Data, err)
			}
		})
	})

	t.Run("a rollback does not take back an object another bundle deployment installed since", func(t *testing.T) {
		v1 := h.pushBundle("roll-v1", map[string]string{"manifests/cm.yaml": configMap("roll-x", "a") + "---\n" + configMap("roll-y", "a")})
		v2 := h.pushBundle("roll-v2", map[string]string{"manifests/cm.yaml": configMap("roll-y", "a")})
		if err := h.c.Create(ctx, newBD("roll-a", v1)); err != nil {
			t.Fatal(err)
		}
		h.waitBD("roll-a", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
		h.updateBD("roll-a", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = v2 })
		eventually(t, "roll-x dropped", func() error {
			if _, err := h.getCM("roll-x"); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there: %w", err)
			}
			return nil
		})
		b := h.pushBundle("roll-b", map[string]string{"manifests/cm.yaml": configMap("roll-x", "b")})
		if err := h.c.Create(ctx, newBD("roll-b", b)); err != nil {
			t.Fatal(err)
		}
		h.waitBD("roll-b", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")

		h.updateBD("roll-a", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = v1 })
		h.waitBD("roll-a", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonUpgradeFailed,
			"ConfigMap default/roll-x exists and is not managed by this release (rukpak-system/roll-a): it is owned by release rukpak-system/roll-b; delete it or remove it from the bundle")
		if cm, err := h.getCM("roll-x"); err != nil || cm.Data["value"] != "b" || cm.Labels[rukpakv1alpha1.LabelOwnerName] != "roll-b" {
			t.Errorf("roll-b's object was taken: %v %v %v", cm.Labels, cm.Data, err)
		}
	})

	t.Run("objects are never installed into the provisioner's namespace", func(t *testing.T) {
		record := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: sh.helm.release.v1.victim.v9\n  labels: {owner: helm, name: victim, status: deployed, version: \"9\"}\ntype: helm.sh/release.v1\n"
		explicit := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: sh.helm.release.v1.victim.v9\n  namespace: rukpak-system\n  labels: {owner: helm, name: victim, status: deployed, version: \"9\"}\ntype: helm.sh/release.v1\n"
		cases := []struct{ name, manifest, want string }{
			{"no-namespace", record, "Secret sh.helm.release.v1.victim.v9 has no namespace: set metadata.namespace in the bundle, or an install namespace for objects without one (spec.config.installNamespace)"},
			{"provisioner-namespace", explicit, `Secret rukpak-system/sh.helm.release.v1.victim.v9 is in the provisioner's namespace "rukpak-system", which holds release records and credentials: bundles may not install objects there`},
		}
		for _, tc := range cases {
			src := h.pushBundle(tc.name, map[string]string{"manifests/secret.yaml": tc.manifest})
			if err := h.c.Create(ctx, newBD(tc.name, src)); err != nil {
				t.Fatal(err)
			}
			bd := h.waitBD(tc.name, rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInstallFailed, tc.want)
			if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled); withoutRetry(c.Message) != tc.want {
				t.Errorf("%s: Installed message %q, want %q", tc.name, c.Message, tc.want)
			}
		}
		err := h.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "sh.helm.release.v1.victim.v9"}, &corev1.Secret{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("a bundle installed a release record into the provisioner's namespace: %v", err)
		}
	})

	t.Run("spec.config.installNamespace places objects without a namespace", func(t *testing.T) {
		if err := h.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
			t.Fatal(err)
		}
		loose := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: loose\ndata:\n  value: x\n"
		src := h.pushBundle("placed", map[string]string{"manifests/cm.yaml": loose})
		bd := newBD("placed", src)
		bd.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(`{"installNamespace":"team-a"}`)}
		if err := h.c.Create(ctx, bd); err != nil {
			t.Fatal(err)
		}
		h.waitBD("placed", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "loose"}, &corev1.ConfigMap{}); err != nil {
			t.Errorf("not installed into the install namespace: %v", err)
		}
	})
}
