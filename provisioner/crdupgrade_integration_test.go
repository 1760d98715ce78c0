package provisioner_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/crdupgrade"
	"github.com/rukpak-dev/rukpak/provisioner"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
)

// gizmoCRD is a CRD whose spec.mode allows the given values and whose
// spec.size is at most maxSize (spec.pad is any string).
func gizmoCRD(modes string, maxSize int) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.example.com
spec:
  group: example.com
  names: {plural: gizmos, singular: gizmo, kind: Gizmo, listKind: GizmoList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              mode: {type: string, enum: [%s]}
              size: {type: integer, maximum: %d}
              pad: {type: string}
`, modes, maxSize)
}

func (h *harness) gizmo(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.com/v1")
	u.SetKind("Gizmo")
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, u); err != nil {
		h.t.Fatalf("getting gizmo %s: %v", name, err)
	}
	return u
}

func (h *harness) liveModes() []any {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := h.c.Get(context.Background(), client.ObjectKey{Name: "gizmos.example.com"}, crd); err != nil {
		h.t.Fatal(err)
	}
	var modes []any
	for _, e := range crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["mode"].Enum {
		modes = append(modes, string(e.Raw))
	}
	return modes
}

// createGizmos creates gizmos g1 (mode a) and g2, g3, g4 (mode b) in
// default.
func (h *harness) createGizmos() {
	h.t.Helper()
	for name, mode := range map[string]string{"g1": "a", "g2": "b", "g3": "b", "g4": "b"} {
		g := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Gizmo",
			"metadata": map[string]any{"name": name, "namespace": "default"},
			"spec":     map[string]any{"mode": mode, "size": int64(50)},
		}}
		if err := h.c.Create(context.Background(), g); err != nil {
			h.t.Fatal(err)
		}
	}
}

// A pivot whose CRD would break existing objects applies nothing and keeps
// the old Bundle active; fixing the objects, or the opt-out annotation,
// lets it through.
func TestIntegrationCRDUpgradePreflight(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()

	v1 := h.pushBundle("gizmo-v1", map[string]string{"manifests/crd.yaml": gizmoCRD("a, b", 100)})
	if err := h.c.Create(ctx, newBD("gizmos", v1)); err != nil {
		t.Fatal(err)
	}
	first := h.waitBD("gizmos", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "").Status.ActiveBundle
	h.createGizmos()

	// v2 drops the mode "b" that g2, g3 and g4 use.
	v2 := h.pushBundle("gizmo-v2", map[string]string{"manifests/crd.yaml": gizmoCRD("a", 100)})
	h.updateBD("gizmos", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = v2 })
	var second string
	t.Run("a pivot that breaks three objects names them and leaves the old version serving", func(t *testing.T) {
		bd := h.waitBD("gizmos", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonUpgradePreflightFailed, "")
		second = bd.Status.GeneratedBundles[len(bd.Status.GeneratedBundles)-1].Name
		unsupported := `(spec.mode: Unsupported value: "b": supported values: "a")`
		want := `CRD upgrade preflight failed: CRD gizmos.example.com: EnumNarrowed in v1 spec.mode: enum values removed: "b"; 3 existing objects affected: ` +
			`default/g2 ` + unsupported + `, default/g3 ` + unsupported + `, default/g4 ` + unsupported + fmt.Sprintf(`. Bundle %q was not installed`, second)
		if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled); c.Message != want {
			t.Errorf("message:\n got %s\nwant %s", c.Message, want)
		}
		if bd.Status.ActiveBundle != first || second == first {
			t.Errorf("active bundle %q (first %q, new %q)", bd.Status.ActiveBundle, first, second)
		}
		h.bundle(first) // still there
		if got := h.liveModes(); fmt.Sprint(got) != `["a" "b"]` {
			t.Errorf("CRD on the cluster allows modes %v, want the old a and b", got)
		}
		// The old schema still serves, and takes writes of the objects.
		g := h.gizmo("g2")
		if err := unstructured.SetNestedField(g.Object, int64(60), "spec", "size"); err != nil {
			t.Fatal(err)
		}
		if err := h.c.Update(ctx, g); err != nil {
			t.Errorf("updating g2 under the old schema: %v", err)
		}
		// One event per offending object, related to it.
		eventually(t, "events about g2, g3 and g4", func() error {
			var events eventsv1.EventList
			if err := h.c.List(ctx, &events, client.InNamespace("default")); err != nil {
				return err
			}
			var related []string
			for _, e := range events.Items {
				if e.Reason == rukpakv1alpha1.ReasonUpgradePreflightFailed && e.Related != nil && e.Regarding.Name == "gizmos" {
					related = append(related, e.Related.Name+": "+e.Note)
				}
			}
			slices.Sort(related)
			want := []string{
				`g2: CRD gizmos.example.com upgrade would break default/g2: EnumNarrowed in v1 spec.mode: enum values removed: "b" ` + unsupported,
				`g3: CRD gizmos.example.com upgrade would break default/g3: EnumNarrowed in v1 spec.mode: enum values removed: "b" ` + unsupported,
				`g4: CRD gizmos.example.com upgrade would break default/g4: EnumNarrowed in v1 spec.mode: enum values removed: "b" ` + unsupported,
			}
			if !slices.Equal(related, want) {
				return fmt.Errorf("events %q", related)
			}
			return nil
		})
	})

	t.Run("the same pivot proceeds once the objects are fixed", func(t *testing.T) {
		for _, name := range []string{"g2", "g3", "g4"} {
			patch := []byte(`{"spec":{"mode":"a"}}`)
			g := h.gizmo(name)
			if err := h.c.Patch(ctx, g, client.RawPatch(types.MergePatchType, patch)); err != nil {
				t.Fatal(err)
			}
		}
		// No event reaches the BundleDeployment: the periodic recheck
		// finds the objects fixed.
		bd := h.waitBD("gizmos", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, second)
		if bd.Status.ActiveBundle != second {
			t.Errorf("active bundle %q, want %q", bd.Status.ActiveBundle, second)
		}
		if got := h.liveModes(); fmt.Sprint(got) != `["a"]` {
			t.Errorf("CRD on the cluster allows modes %v, want a", got)
		}
	})

	t.Run("the opt-out annotation lets a breaking pivot through", func(t *testing.T) {
		// v3 caps size at 10; every gizmo has 50 or 60.
		v3 := h.pushBundle("gizmo-v3", map[string]string{"manifests/crd.yaml": gizmoCRD("a", 10)})
		h.updateBD("gizmos", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = v3 })
		bd := h.waitBD("gizmos", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonUpgradePreflightFailed,
			"BoundsChanged in v1 spec.size: maximum changed from 100 to 10; 4 existing objects affected: default/g1 (spec.size: Invalid value: 50: spec.size in body should be less than or equal to 10)")
		third := bd.Status.GeneratedBundles[len(bd.Status.GeneratedBundles)-1].Name
		h.updateBD("gizmos", func(bd *rukpakv1alpha1.BundleDeployment) {
			if bd.Annotations == nil {
				bd.Annotations = map[string]string{}
			}
			bd.Annotations[rukpakv1alpha1.AnnotationSkipCRDUpgradePreflight] = "true"
		})
		bd = h.waitBD("gizmos", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, third)
		if bd.Status.ActiveBundle != third {
			t.Errorf("active bundle %q, want %q", bd.Status.ActiveBundle, third)
		}
	})
}

// A pivot whose CRD preflight would read more than its byte budget (here 2
// MiB, of 4 objects of 0.8 MiB that a namespace user created) fails with a
// message naming the CRD, the limit and its flag, applies nothing and
// keeps the old Bundle active; once the objects fit, it proceeds.
func TestIntegrationCRDUpgradePreflightBudget(t *testing.T) {
	t.Parallel()
	h := newHarnessWith(t, func(o *provisioner.Options) { o.Preflight = crdupgrade.Options{MaxBytes: 2 << 20} })
	ctx := context.Background()

	v1 := h.pushBundle("gizmo-v1", map[string]string{"manifests/crd.yaml": gizmoCRD("a, b", 100)})
	if err := h.c.Create(ctx, newBD("gizmos", v1)); err != nil {
		t.Fatal(err)
	}
	first := h.waitBD("gizmos", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "").Status.ActiveBundle
	for i := range 4 {
		g := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Gizmo",
			"metadata": map[string]any{"name": fmt.Sprintf("big-%d", i), "namespace": "default"},
			"spec":     map[string]any{"mode": "a", "size": int64(1), "pad": strings.Repeat("x", 800<<10)},
		}}
		if err := h.c.Create(ctx, g); err != nil {
			t.Fatal(err)
		}
	}

	v2 := h.pushBundle("gizmo-v2", map[string]string{"manifests/crd.yaml": gizmoCRD("a", 100)})
	h.updateBD("gizmos", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = v2 })
	bd := h.waitBD("gizmos", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonUpgradePreflightFailed, "could not finish")
	second := bd.Status.GeneratedBundles[len(bd.Status.GeneratedBundles)-1].Name
	// The third object takes the objects read over 2 MiB.
	want := fmt.Sprintf(`CRD upgrade preflight for bundle %q could not finish within its bounds: checking the objects of CRD gizmos.example.com at version v1: `+
		`the objects read so far take 2.3 MiB, more than the limit of 2 MiB (--crd-preflight-max-bytes). Bundle %q was not installed`, second, second)
	if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled); c.Message != want {
		t.Errorf("message:\n got %s\nwant %s", c.Message, want)
	}
	if bd.Status.ActiveBundle != first || second == first {
		t.Errorf("active bundle %q (first %q, new %q)", bd.Status.ActiveBundle, first, second)
	}
	if got := h.liveModes(); fmt.Sprint(got) != `["a" "b"]` {
		t.Errorf("CRD on the cluster allows modes %v, want the old a and b", got)
	}

	// With two objects left, the periodic recheck reads 1.6 MiB: the pivot
	// proceeds.
	for _, name := range []string{"big-0", "big-1"} {
		if err := h.c.Delete(ctx, h.gizmo(name)); err != nil {
			t.Fatal(err)
		}
	}
	bd = h.waitBD("gizmos", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, second)
	if bd.Status.ActiveBundle != second {
		t.Errorf("active bundle %q, want %q", bd.Status.ActiveBundle, second)
	}
	if got := h.liveModes(); fmt.Sprint(got) != `["a"]` {
		t.Errorf("CRD on the cluster allows modes %v, want a", got)
	}
}
