package release

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
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

// What Manifest writes reads back as the same objects, whatever the values
// look like: strings YAML would take for other types, long and multi-line
// strings, numbers, nulls and nesting.
func TestManifestRoundTrips(t *testing.T) {
	values := map[string]any{
		"yes": "yes", "on": "on", "true": "true", "null": "null", "tilde": "~", "empty": "",
		"int": "1", "octal": "0755", "float": "1.5", "exp": "1e3", "hex": "0x1F", "sexagesimal": "1:20",
		"colon": "a: b", "dash": "- x", "hash": "# not a comment", "quote": `"quoted" and 'single'`,
		"multiline": "line one\nline two\n", "trailing space": "x ", "tab": "a\tb",
		"long": strings.Repeat("word ", 40), "unicode": "héllo ✓", "braces": "{{ .x }}", "doc": "---\nkind: Secret",
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "tricky", "namespace": "ns", "labels": map[string]any{"a": "1"}},
		"data":     values,
		"spec": map[string]any{
			"replicas": int64(3), "big": int64(1) << 53, "ratio": 0.25, "enabled": false, "none": nil,
			"list": []any{"a", int64(2), map[string]any{"k": "v"}, []any{}}, "emptyMap": map[string]any{},
		},
	}}
	other := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "ns"}}}
	manifest, err := Manifest([]*unstructured.Unstructured{obj, other}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("decoded %d objects, want 2:\n%s", len(got), manifest)
	}
	if !equality.Semantic.DeepEqual(got[0].Object, other.Object) || !equality.Semantic.DeepEqual(got[1].Object, obj.Object) {
		t.Fatalf("round trip changed the objects:\n got %v\nwant %v\nmanifest:\n%s", got[1].Object, obj.Object, manifest)
	}
}
