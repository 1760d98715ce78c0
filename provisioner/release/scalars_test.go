package release

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The release manifest is written with yaml.v2 (YAML 1.1) and read back with
// apimachinery's decoder: strings that YAML 1.1 would resolve to another
// type when unquoted (booleans, null, numbers, timestamps) must be quoted on
// the way out, so the objects applied from a stored release keep them as
// strings.
func TestManifestKeepsAmbiguousStrings(t *testing.T) {
	values := []string{
		"n", "N", "y", "Y", "yes", "no", "on", "off", "On", "OFF", "true", "False",
		"~", "null", "Null", "", "1", "1.0", "0x1f", "0o17", "0777", "1e3", "1_000",
		"+1", ".inf", "-.Inf", ".nan", "=", "<<", "2024-01-01", "12:30", "190:20:30",
		"0b101", " lead", "trail ", "a: b", "- x", "#c", "@x", "'q'", `"dq"`, "!tag",
		"&a", "*a", "%p", "|", ">", "{}", "[]", "multi\nline", "x\r\n",
	}
	objs := make([]*unstructured.Unstructured, len(values))
	for i, v := range values {
		objs[i] = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "c", "labels": map[string]any{"v": v}},
			"data":     map[string]any{"k": v},
		}}
	}
	manifest, err := Manifest(objs, nil)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(values) {
		t.Fatalf("decoded %d objects, want %d", len(back), len(values))
	}
	for i, v := range values {
		if got := back[i].Object["data"].(map[string]any)["k"]; got != v {
			t.Errorf("data.k %q came back as %#v (%T)", v, got, got)
		}
		if got := back[i].GetLabels()["v"]; got != v {
			t.Errorf("label %q came back as %q", v, got)
		}
	}
}
