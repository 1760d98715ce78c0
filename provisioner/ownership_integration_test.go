package provisioner_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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
// an admin's next template generates and create it first, with the
// BundleDeployment's labels and a controller reference to it. The
// BundleDeployment must install only a Bundle it created itself.
func TestIntegrationGeneratedBundleOwnership(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()

	v1 := h.pushBundle("own-v1", map[string]string{"manifests/cm.yaml": configMap("own-config", "v1")})
	if err := h.c.Create(ctx, newBD("own", v1)); err != nil {
		t.Fatal(err)
	}
	bd := h.waitBD("own", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	if got, want := fmt.Sprint(bd.Status.GeneratedBundles), fmt.Sprintf("[{%s %s}]", bd.Status.ActiveBundle, h.bundle(bd.Status.ActiveBundle).UID); got != want {
		t.Errorf("status.generatedBundles = %s, want %s", got, want)
	}

	// preCreate creates, as the attacker, the Bundle the BundleDeployment
	// would generate for template, with spec.
	preCreate := func(template rukpakv1alpha1.BundleTemplate, spec rukpakv1alpha1.BundleSpec) string {
		t.Helper()
		hash, err := bundledeployment.TemplateHash(template)
		if err != nil {
			t.Fatal(err)
		}
		owner := h.bd("own")
		b := &rukpakv1alpha1.Bundle{
			ObjectMeta: metav1.ObjectMeta{
				Name: "own-" + hash,
				Labels: map[string]string{
					"app":                                  "own",
					rukpakv1alpha1.LabelOwnerKind:          "BundleDeployment",
					rukpakv1alpha1.LabelOwnerName:          "own",
					rukpakv1alpha1.LabelBundleTemplateHash: hash,
				},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: rukpakv1alpha1.GroupVersion.String(), Kind: "BundleDeployment", Name: "own", UID: owner.UID,
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
				}},
			},
			Spec: spec,
		}
		if err := h.c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		// It is a Bundle of the provisioner's class: it gets unpacked (so
		// the provisioner has seen it before the template changes).
		h.waitBundle(b.Name, rukpakv1alpha1.PhaseUnpacked, rukpakv1alpha1.ReasonUnpackSuccessful, "")
		return b.Name
	}
	template := func(src rukpakv1alpha1.BundleSource) rukpakv1alpha1.BundleTemplate {
		next := h.bd("own").Spec.Template.DeepCopy()
		next.Spec.Source = src
		return *next
	}
	expectRefused := func(want string) {
		t.Helper()
		bd := h.waitBD("own", rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonCreateBundleFailed, want)
		if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeHasValidBundle); c.Message != want {
			t.Errorf("HasValidBundle message %q, want %q", c.Message, want)
		}
	}

	var v2Bundle string
	t.Run("a pre-created bundle with other content is refused, and kept", func(t *testing.T) {
		evil := h.pushBundle("evil", map[string]string{"manifests/cm.yaml": configMap("evil", "pwned")})
		v2 := h.pushBundle("own-v2", map[string]string{"manifests/cm.yaml": configMap("own-config", "v2")})
		name := preCreate(template(v2), rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Source: evil})
		active := h.bd("own").Status.ActiveBundle

		h.updateBD("own", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = v2 })
		expectRefused(fmt.Sprintf("bundle %q was not created by this bundle deployment and its spec differs from the template: refusing to install it; delete it to let the bundle deployment create its own", name))
		if _, err := h.getCM("evil"); !apierrors.IsNotFound(err) {
			t.Errorf("the pre-created bundle's content was installed: %v", err)
		}
		if cm, err := h.getCM("own-config"); err != nil || cm.Data["value"] != "v1" {
			t.Errorf("installed content changed: %v %v", cm.Data, err)
		}
		if got := h.bd("own").Status.ActiveBundle; got != active {
			t.Errorf("activeBundle moved to %q", got)
		}
		h.bundle(name) // not deleted: it is the attacker's object

		// Once it is gone, the bundle deployment creates its own.
		if err := h.c.Delete(ctx, h.bundle(name)); err != nil {
			t.Fatal(err)
		}
		eventually(t, "v2 installed", func() error {
			if cm, err := h.getCM("own-config"); err != nil || cm.Data["value"] != "v2" {
				return fmt.Errorf("own-config %v: %w", cm.Data, err)
			}
			return nil
		})
		bd := h.waitBD("own", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, fmt.Sprintf("Instantiated bundle %q", name))
		v2Bundle = name
		if b := h.bundle(name); bd.Status.ActiveBundle != name || !metav1.IsControlledBy(b, bd) || fmt.Sprint(bd.Status.GeneratedBundles) != fmt.Sprintf("[{%s %s}]", name, b.UID) {
			t.Errorf("activeBundle %q, records %v; want the bundle deployment's own %q", bd.Status.ActiveBundle, bd.Status.GeneratedBundles, name)
		}
	})

	t.Run("a pre-created bundle with the template's own spec is refused too", func(t *testing.T) {
		v3 := h.pushBundle("own-v3", map[string]string{"manifests/cm.yaml": configMap("own-config", "v3")})
		next := template(v3)
		name := preCreate(next, next.Spec)
		h.updateBD("own", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = v3 })
		expectRefused(fmt.Sprintf("bundle %q was not created by this bundle deployment: refusing to install it; delete it to let the bundle deployment create its own", name))
		if cm, err := h.getCM("own-config"); err != nil || cm.Data["value"] != "v2" {
			t.Errorf("installed content changed: %v %v", cm.Data, err)
		}
	})

	t.Run("bundles it created are still its own after a restart", func(t *testing.T) {
		h.kill()
		h.start()
		v2 := h.bundle(v2Bundle).Spec.Source
		h.updateBD("own", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = v2 })
		h.waitBD("own", rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionTrue, rukpakv1alpha1.ReasonUnpackSuccessful, fmt.Sprintf("Successfully unpacked bundle %q", v2Bundle))
		h.waitBD("own", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
		if cm, err := h.getCM("own-config"); err != nil || cm.Data["value"] != "v2" {
			t.Errorf("installed content: %v %v", cm.Data, err)
		}
	})
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
			if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled); c.Message != tc.want {
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
