package registry

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The tests below pin, on real community bundles, where conversion matches
// OLM's registry+v1 install (issue #13, item 5).

// Operators read the install namespace from the pod annotation
// olm.operatorNamespace through the downward API; OLM sets it.
func TestCorpusOperatorNamespaceAnnotation(t *testing.T) {
	out, err := Convert(corpusBundle(t, "prometheus-0.47.0"), Options{InstallNamespace: "monitoring", WatchNamespaces: []string{"apps"}})
	if err != nil {
		t.Fatal(err)
	}
	dep := find(t, out, "Deployment", "monitoring", "prometheus-operator")
	ann, _, err := unstructured.NestedStringMap(dep.Object, "spec", "template", "metadata", "annotations")
	if err != nil {
		t.Fatal(err)
	}
	if got := ann[AnnotationOperatorNamespace]; got != "monitoring" {
		t.Fatalf("pod template annotation %s = %q, want %q", AnnotationOperatorNamespace, got, "monitoring")
	}
	if got := ann[AnnotationTargetNamespaces]; got != "apps" {
		t.Fatalf("pod template annotation %s = %q, want %q", AnnotationTargetNamespaces, got, "apps")
	}
}

// OLM (v0 and v1) sets revisionHistoryLimit: 1 on every operator Deployment.
func TestCorpusRevisionHistoryLimit(t *testing.T) {
	out, err := Convert(corpusBundle(t, "konveyor-operator-0.3.1"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	dep := find(t, out, "Deployment", "konveyor-tackle", "tackle-operator")
	got, found, err := unstructured.NestedInt64(dep.Object, "spec", "revisionHistoryLimit")
	if err != nil || !found || got != 1 {
		t.Fatalf("spec.revisionHistoryLimit = %d (found %v, err %v), want 1", got, found, err)
	}
}
