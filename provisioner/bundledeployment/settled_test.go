package bundledeployment

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

func settledTestObject(apiVersion, kind, name string, labels map[string]string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
	o.SetNamespace("ns")
	o.SetName(name)
	o.SetLabels(labels)
	return o
}

func TestSettledSetBounds(t *testing.T) {
	var key settledKey
	var status [sha256.Size]byte
	cm := settledTestObject("v1", "ConfigMap", "cm", nil)
	dep := func(name string, labelBytes int) *unstructured.Unstructured {
		o := settledTestObject("apps/v1", "Deployment", name, map[string]string{"big": strings.Repeat("x", labelBytes)})
		_ = unstructured.SetNestedField(o.Object, map[string]any{"matchLabels": map[string]any{"app": name}}, "spec", "selector")
		return o
	}

	s := newSettledSet()
	// Objects without a status: nothing to gain, not held.
	s.put("statusless", key, status, time.Time{}, []*unstructured.Unstructured{cm})
	if _, ok := s.get("statusless"); ok || s.bytes != 0 {
		t.Errorf("a BundleDeployment of ConfigMaps was settled (%d bytes held)", s.bytes)
	}

	// A Deployment: held with its labels and selector, and counted.
	s.put("web", key, status, time.Time{}, []*unstructured.Unstructured{cm, dep("web", 10)})
	st, ok := s.get("web")
	if !ok || len(st.objects) != 2 || st.objects[1].want == nil || st.objects[0].want != nil {
		t.Fatalf("settled %v: %+v", ok, st)
	}
	if sel, ok, _ := unstructured.NestedMap(st.objects[1].want.Object, "spec", "selector"); !ok || sel["matchLabels"] == nil {
		t.Errorf("the Deployment's skeleton has no selector: %v", st.objects[1].want.Object)
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(st.objects[1].want.Object, "spec", "replicas"); ok {
		t.Errorf("the skeleton holds more of the spec than its selector: %v", st.objects[1].want.Object)
	}
	held := s.bytes
	if held <= 0 {
		t.Fatalf("%d bytes held", held)
	}

	// Labels the bundle's author chose are counted: a BundleDeployment
	// whose labels would pass the bound is not settled, and the others stay.
	s.put("huge", key, status, time.Time{}, []*unstructured.Unstructured{dep("huge", maxSettledBytes)})
	if _, ok := s.get("huge"); ok || s.bytes != held {
		t.Errorf("a BundleDeployment over the bound was settled, or changed what is held: %d bytes, want %d", s.bytes, held)
	}
	// Settled again: replaced, not added.
	s.put("web", key, status, time.Time{}, []*unstructured.Unstructured{cm, dep("web", 10)})
	if s.bytes != held {
		t.Errorf("settling again holds %d bytes, want %d", s.bytes, held)
	}
	s.forget("web")
	if _, ok := s.get("web"); ok || s.bytes != 0 {
		t.Errorf("forgotten, yet %d bytes held", s.bytes)
	}

	// Many kinds: interned up to the bound only.
	for i := range maxSettledKinds + 10 {
		s.put(fmt.Sprint("k", i), key, status, time.Time{}, []*unstructured.Unstructured{settledTestObject("example.com/v1", fmt.Sprint("Kind", i), "x", nil)})
	}
	if len(s.kinds) > maxSettledKinds {
		t.Errorf("%d kinds interned, bound %d", len(s.kinds), maxSettledKinds)
	}

	var none *settledSet
	none.put("x", key, status, time.Time{}, []*unstructured.Unstructured{dep("x", 1)})
	none.forget("x")
	if _, ok := none.get("x"); ok {
		t.Error("a nil set holds something")
	}
}

// A BundleDeployment settles only on what its reconcile installed: a
// spec, label or annotation change made during the reconcile, which the
// status write's answer brings into it, was not installed, and the
// reconcile its event queues must go the full way (an outside review
// reproduced a config change reported as applied and never installed).
func TestSettleOnlyOnWhatWasInstalled(t *testing.T) {
	bundle := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "b", UID: "bu", ResourceVersion: "7"}}
	newBD := func() *rukpakv1alpha1.BundleDeployment {
		bd := &rukpakv1alpha1.BundleDeployment{ObjectMeta: metav1.ObjectMeta{
			Name: "bd", UID: "u", Generation: 1, Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"note": "x"},
		}}
		bd.Status.ObservedGeneration = 1
		bd.Status.ActiveBundle = "b"
		return bd
	}
	for _, tc := range []struct {
		name   string
		change func(bd *rukpakv1alpha1.BundleDeployment)
		settle bool
	}{
		{"nothing changed", func(*rukpakv1alpha1.BundleDeployment) {}, true},
		{"the spec changed (its generation)", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Generation = 2 }, false},
		{"a label changed", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Labels["team"] = "b" }, false},
		{"an annotation was added", func(bd *rukpakv1alpha1.BundleDeployment) {
			bd.Annotations[rukpakv1alpha1.AnnotationReconcileRequestedAt] = "now"
		}, false},
		{"recreated (its UID)", func(bd *rukpakv1alpha1.BundleDeployment) { bd.UID = "v" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{Releases: &release.Manager{}, settled: newSettledSet()}
			bd := newBD()
			started := settledKeyWith(bd, &rukpakv1alpha1.Bundle{}, "")
			tc.change(bd)
			dep := settledTestObject("apps/v1", "Deployment", "web", nil)
			r.settle(bd, &settleCandidate{bundle: bundle, objs: []*unstructured.Unstructured{dep}, records: "r@1"}, started)
			if _, settled := r.settled.get("bd"); settled != tc.settle {
				t.Errorf("settled %v, want %v", settled, tc.settle)
			}
		})
	}
}
