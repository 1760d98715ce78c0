package bundledeployment

import (
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
	// The cache is never changed by a read: unfold works on a copy.
	if len(out.Labels) != 4 {
		t.Fatalf("cached labels changed: %v", out.Labels)
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
