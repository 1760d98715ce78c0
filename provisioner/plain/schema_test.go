package plain

import (
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// A bundle's CRD is installed as kubectl and the API server read the same
// manifest: a property schema that repeats a key (same value) must not come
// out as an earlier property schema of the same members' hash.
func TestDecodeKeepsARepeatedKeyInACRDSchema(t *testing.T) {
	const crd = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names:
    kind: Widget
    plural: widgets
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          first:
            type: string
            format: date
            date: format
          second:
            type: string
            format: date
            format: date
`
	objs, err := Decode("crd.yaml", []byte(crd))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal([]byte(crd), &want); err != nil {
		t.Fatal(err)
	}
	props := func(o map[string]any) any {
		v := o["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)
		return v["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["second"]
	}
	if got, want := props(objs[0].Object), props(want); !reflect.DeepEqual(got, want) {
		t.Errorf("properties.second decoded as %v, want %v", got, want)
	}
}
