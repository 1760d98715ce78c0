package testfiles

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Regrouped is crd (a CustomResourceDefinition's fields, left unchanged)
// serving its kinds in prefix + its group instead, renamed
// <plural>.<new group> as the API server requires: a CRD of its own,
// beside the original. It returns the new name and the YAML.
func Regrouped(tb testing.TB, crd map[string]any, prefix string) (string, []byte) {
	tb.Helper()
	u := (&unstructured.Unstructured{Object: crd}).DeepCopy()
	group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(u.Object, "spec", "names", "plural")
	if group == "" || plural == "" {
		tb.Fatalf("CRD %s has no spec.group or spec.names.plural", u.GetName())
	}
	group = prefix + group
	if err := unstructured.SetNestedField(u.Object, group, "spec", "group"); err != nil {
		tb.Fatal(err)
	}
	u.SetName(plural + "." + group)
	y, err := yaml.Marshal(u.Object)
	if err != nil {
		tb.Fatal(err)
	}
	return u.GetName(), y
}
