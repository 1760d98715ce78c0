package bundledeployment

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// The cache of installed objects keeps what drift, health and ownership
// read, and a copy read from it (Metadata) answers as the object would.
func TestTrimMetadataKeepsWhatTheTrackerReads(t *testing.T) {
	deleting := metav1.Now()
	in := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "cm", Namespace: "ns", ResourceVersion: "42", UID: "u",
			DeletionTimestamp: &deleting,
			Labels: map[string]string{
				rukpakv1alpha1.LabelOwnerKind:  "BundleDeployment",
				rukpakv1alpha1.LabelOwnerName:  "bd",
				"app.kubernetes.io/managed-by": "Helm",
			},
			Annotations: map[string]string{
				"meta.helm.sh/release-name":      "other",
				"meta.helm.sh/release-namespace": "rukpak-system",
				"big":                            "x",
			},
			OwnerReferences: []metav1.OwnerReference{{Name: "bd"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "m"}},
			Finalizers:      []string{"f"},
		},
	}
	outAny, err := trimMetadata(in)
	if err != nil {
		t.Fatal(err)
	}
	out := outAny.(*metav1.PartialObjectMetadata)
	if out.Name != "cm" || out.Namespace != "ns" || out.ResourceVersion != "42" || out.DeletionTimestamp == nil || out.Kind != "ConfigMap" {
		t.Fatalf("lost what the tracker reads: %+v", out)
	}
	if out.UID != "" || out.OwnerReferences != nil || out.ManagedFields != nil || out.Finalizers != nil || out.Annotations != nil {
		t.Fatalf("kept what the tracker does not read: %+v", out.ObjectMeta)
	}
	if len(out.Labels) != 4 {
		t.Fatalf("labels %v: want the owner labels and the two ownership annotations", out.Labels)
	}
	// Trimming its own output changes nothing.
	again, err := trimMetadata(out.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(again, out) {
		t.Fatalf("trimmed twice: %+v, once: %+v", again, out)
	}
	got := out.DeepCopy()
	unfold(got)
	wantLabels := map[string]string{rukpakv1alpha1.LabelOwnerKind: "BundleDeployment", rukpakv1alpha1.LabelOwnerName: "bd"}
	if len(got.Labels) != 2 || got.Labels[rukpakv1alpha1.LabelOwnerKind] != wantLabels[rukpakv1alpha1.LabelOwnerKind] || got.Labels[rukpakv1alpha1.LabelOwnerName] != "bd" {
		t.Fatalf("labels after unfold %v, want %v", got.Labels, wantLabels)
	}
	if ns, name := release.Owner(got); ns != "rukpak-system" || name != "other" {
		t.Fatalf("release owner after unfold %s/%s, want rukpak-system/other", ns, name)
	}
	// Ownership decisions read the unfolded copy as the live object.
	want := &unstructured.Unstructured{}
	want.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	want.SetLabels(map[string]string{rukpakv1alpha1.LabelOwnerKind: "BundleDeployment", rukpakv1alpha1.LabelOwnerName: "bd"})
	want.SetAnnotations(map[string]string{"meta.helm.sh/release-name": "bd", "meta.helm.sh/release-namespace": "rukpak-system"})
	if owner := ownedElsewhere(want, got); owner != "release rukpak-system/other" {
		t.Fatalf("ownedElsewhere = %q, want release rukpak-system/other", owner)
	}

	// Without ownership annotations there are none after unfold either.
	plain, _ := trimMetadata(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "a",
		Labels: map[string]string{rukpakv1alpha1.LabelOwnerKind: "BundleDeployment", rukpakv1alpha1.LabelOwnerName: "bd"}}})
	p := plain.(*metav1.PartialObjectMetadata).DeepCopy()
	unfold(p)
	if p.Annotations != nil || len(p.Labels) != 2 {
		t.Fatalf("unfold of an object without annotations: %+v", p.ObjectMeta)
	}
	// unfold of an object sharing its labels map leaves the map as it was.
	shared := out.DeepCopy()
	shared.Labels = out.Labels
	unfold(shared)
	if len(out.Labels) != 4 {
		t.Fatalf("unfold changed the labels map it shares: %v", out.Labels)
	}
	// The cache is never changed by a read: unfold works on a copy.
	if len(out.Labels) != 4 {
		t.Fatalf("cached labels changed: %v", out.Labels)
	}
}

// The objects of one owner share one labels map in the cache; other labels
// get their own, and the table behind the sharing stays bounded whatever
// labels it is fed.
func TestTrimMetadataSharesLabels(t *testing.T) {
	obj := func(name, owner, release string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
			Labels:      map[string]string{rukpakv1alpha1.LabelOwnerKind: "BundleDeployment", rukpakv1alpha1.LabelOwnerName: owner},
			Annotations: map[string]string{"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": "ns"},
		}}
	}
	labelsOf := func(in *metav1.PartialObjectMetadata) map[string]string {
		out, err := trimMetadata(in)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*metav1.PartialObjectMetadata).Labels
	}
	same := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	a, b := labelsOf(obj("a", "bd", "bd")), labelsOf(obj("b", "bd", "bd"))
	if !same(a, b) {
		t.Error("two objects of one owner and release hold two labels maps")
	}
	if c := labelsOf(obj("c", "bd", "other")); same(a, c) || c[annotatedKey(annotatedKeys[0])] != "other" {
		t.Errorf("an object of another release shares the map: %v", c)
	}
	if d := labelsOf(obj("d", "bd2", "bd2")); same(a, d) || d[rukpakv1alpha1.LabelOwnerName] != "bd2" {
		t.Errorf("an object of another owner shares the map: %v", d)
	}

	l := &labelMaps{}
	long := strings.Repeat("x", 250)
	for i := range 3 * maxLabelSets {
		s := labelSet{values: [4]string{"BundleDeployment", fmt.Sprintf("%s-%d", long, i)}, has: [4]bool{true, true}}
		if got := l.get(s); got[rukpakv1alpha1.LabelOwnerName] != s.values[1] {
			t.Fatalf("labels %v for owner %s", got, s.values[1])
		}
		if len(l.maps) > maxLabelSets || l.bytes > maxLabelSetBytes {
			t.Fatalf("table holds %d sets, %d bytes", len(l.maps), l.bytes)
		}
	}
	huge := labelSet{values: [4]string{"BundleDeployment", strings.Repeat("y", 1<<20)}, has: [4]bool{true, true}}
	if got := l.get(huge); len(got[rukpakv1alpha1.LabelOwnerName]) != 1<<20 {
		t.Fatal("a long label lost")
	}
	if _, kept := l.maps[huge]; kept {
		t.Error("a set of 1 MiB was kept in the table")
	}
}

// Verdicts are keyed by kind, namespace and name.
func TestKeyOfDistinguishesObjects(t *testing.T) {
	obj := func(apiVersion, kind, ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	base := obj("v1", "ConfigMap", "ns", "a")
	if keyOf(base) != keyOf(obj("v1", "ConfigMap", "ns", "a")) {
		t.Fatal("the same object has two keys")
	}
	for _, o := range []*unstructured.Unstructured{
		obj("v1", "Secret", "ns", "a"), obj("v1", "ConfigMap", "ns2", "a"), obj("v1", "ConfigMap", "ns", "b"),
		obj("apps/v1", "ConfigMap", "ns", "a"), obj("v1", "ConfigMap", "nsa", ""), obj("v1", "ConfigMap", "", "nsa"),
	} {
		if keyOf(o) == keyOf(base) {
			t.Errorf("%s %s/%s has the key of %s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName(), base.GetKind(), base.GetNamespace(), base.GetName())
		}
	}
}
