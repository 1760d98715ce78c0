package release

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func TestUnknownFieldsReadsStrictDecodingErrors(t *testing.T) {
	cases := []struct {
		name, msg string
		want      []string
	}{
		{"built-in kind, as the API server words it",
			`Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.template.spec.volumes[0].defaultMode", unknown field "spec.template.spec.volumes[0].secretName"`,
			[]string{"spec.template.spec.volumes[0].defaultMode", "spec.template.spec.volumes[0].secretName"}},
		{"custom resource", `Thing in version "v1" cannot be handled as a Thing: strict decoding error: unknown field "spec.bogus"`,
			[]string{"spec.bogus"}},
		{"escaped quote in a key", `strict decoding error: unknown field "spec.a\"b", unknown field "spec.c"`,
			[]string{`spec.a"b`, "spec.c"}},
		{"duplicate fields are skipped", `strict decoding error: duplicate field "spec.x", unknown field "spec.y"`,
			[]string{"spec.y"}},
		{"not a strict decoding error", `deployments.apps "d" already exists`, nil},
		{"cut short", `strict decoding error: unknown field "spec.a`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := unknownFields(tc.msg); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDropField(t *testing.T) {
	cases := []struct {
		name, obj, path string
		found           bool
		want            string
	}{
		{"top-level spec field", `{"spec":{"version":"v1","group":"g"}}`, "spec.version", true,
			`{"spec":{"group":"g"}}`},
		{"field of a list item", `{"spec":{"volumes":[{"name":"a"},{"name":"b","secretName":"s","secret":{"secretName":"s"}}]}}`,
			"spec.volumes[1].secretName", true,
			`{"spec":{"volumes":[{"name":"a"},{"name":"b","secret":{"secretName":"s"}}]}}`},
		{"list in a list", `{"a":[[{"x":1,"y":2}]]}`, "a[0][0].y", true, `{"a":[[{"x":1}]]}`},
		{"key holding a dot", `{"spec":{"a.b":{"c":1,"d":2}}}`, "spec.a.b.c", true, `{"spec":{"a.b":{"d":2}}}`},
		{"a dotted key where a shorter key also matches", `{"spec":{"a":{"x":1},"a.b":{"c":1}}}`, "spec.a.b.c", true,
			`{"spec":{"a":{"x":1},"a.b":{}}}`},
		{"absent field", `{"spec":{}}`, "spec.version", false, `{"spec":{}}`},
		{"index out of range", `{"a":[{"x":1}]}`, "a[1].x", false, `{"a":[{"x":1}]}`},
		{"negative index", `{"a":[{"x":1}]}`, "a[-1].x", false, `{"a":[{"x":1}]}`},
		{"a list item itself is never dropped", `{"a":[1]}`, "a[0]", false, `{"a":[1]}`},
		{"through a scalar", `{"a":"s"}`, "a.b", false, `{"a":"s"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var obj map[string]any
			if err := json.Unmarshal([]byte(tc.obj), &obj); err != nil {
				t.Fatal(err)
			}
			if got := dropField(obj, tc.path); got != tc.found {
				t.Errorf("found = %v, want %v", got, tc.found)
			}
			b, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("object %s\nwant   %s", b, tc.want)
			}
		})
	}
}

// Keys that can be read many ways cost a bounded search: without the
// bound, this path has Fibonacci(60) readings to try.
func TestDropFieldIsBoundedOnAmbiguousKeys(t *testing.T) {
	obj := map[string]any{}
	for range 60 {
		obj = map[string]any{"a": obj, "a.a": obj}
	}
	path := strings.Repeat("a.", 60) + "missing"
	if dropField(obj, path) {
		t.Fatal("found a field that is not there")
	}
}

func TestCarryDropsMakesAnUnchangedBundleCompareEqual(t *testing.T) {
	parse := func(s string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(s), &u.Object); err != nil {
			t.Fatal(err)
		}
		return u
	}
	crd := parse(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.example.com}
spec: {group: example.com, version: v1}
`)
	cm := configMap("ns", "cm", "x")
	applied := parse(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.example.com
  annotations: {core.rukpak.io/dropped-fields: '["spec.version"]'}
spec: {group: example.com}
`)
	deployed, err := Manifest([]*unstructured.Unstructured{applied, cm}, nil)
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		objs []*unstructured.Unstructured
		same bool
	}{
		{"the same bundle", []*unstructured.Unstructured{crd, cm}, true},
		{"a changed object beside the dropped field", []*unstructured.Unstructured{crd, configMap("ns", "cm", "y")}, false},
		{"the dropped field no longer in the bundle", []*unstructured.Unstructured{parse(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.example.com}
spec: {group: example.com}
`), cm}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			manifest, err := Manifest(tc.objs, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := unchanged(deployed, manifest, tc.objs)
			if err != nil {
				t.Fatal(err)
			}
			if (got != nil) != tc.same {
				t.Fatalf("unchanged = %v, want %v", got != nil, tc.same)
			}
			if got == nil {
				return
			}
			if _, ok := got[0].Object["spec"].(map[string]any)["version"]; ok {
				t.Errorf("the dropped field is back: %v", got[0].Object)
			}
			if got[0].GetAnnotations()[AnnotationDroppedFields] != `["spec.version"]` {
				t.Errorf("annotations %v", got[0].GetAnnotations())
			}
			if _, ok := tc.objs[0].Object["spec"].(map[string]any)["version"]; !ok {
				t.Errorf("the caller's object was changed")
			}
			if got[1] != tc.objs[1] {
				t.Errorf("an object without dropped fields was copied")
			}
		})
	}
}
