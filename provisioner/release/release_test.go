package release

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestManifestOrdersByKindAndStamps(t *testing.T) {
	mk := func(kind, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind(kind)
		u.SetName(name)
		return u
	}
	objs := []*unstructured.Unstructured{
		mk("Widget", "w"), mk("Deployment", "d"), mk("CustomResourceDefinition", "c"), mk("Namespace", "n"), mk("ConfigMap", "cm"),
	}
	got, err := Manifest(objs, func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"stamped": "yes"}) })
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, line := range strings.Split(got, "\n") {
		if k, ok := strings.CutPrefix(line, "kind: "); ok {
			kinds = append(kinds, k)
		}
	}
	// Helm's install order: namespaces first, CRDs before workloads, unknown kinds
	// (custom resources) last.
	want := "Namespace,ConfigMap,CustomResourceDefinition,Deployment,Widget"
	if strings.Join(kinds, ",") != want {
		t.Errorf("install order %v, want %s", kinds, want)
	}
	if strings.Count(got, "stamped: \"yes\"") != len(objs) {
		t.Errorf("not every object was stamped:\n%s", got)
	}
	if objs[0].GetLabels() != nil {
		t.Errorf("Manifest modified its input")
	}
	// A literal template expression stays literal: content never runs
	// through Go templates.
	cm := mk("ConfigMap", "tmpl")
	cm.Object["data"] = map[string]any{"x": "{{ .Values.secret }}"}
	got, err = Manifest([]*unstructured.Unstructured{cm}, nil)
	if err != nil || !strings.Contains(got, "{{ .Values.secret }}") {
		t.Errorf("template text not kept literally: %v\n%s", err, got)
	}
}
