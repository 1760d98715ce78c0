package jsonmap

import (
	"reflect"
	"testing"
	"unsafe"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// A CRD as a bundle writes it (in block style, which the block decoder
// reads): the same property schemas under several fields and in two
// versions, and the same map outside the schema.
const sharedCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
  labels:
    app: widget
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
          spec:
            type: object
            required:
            - name
            - size
            properties:
              name:
                description: >-
                  A name long enough not to be one of the short strings every
                  decode shares.
                type: string
              alias:
                description: >-
                  A name long enough not to be one of the short strings every
                  decode shares.
                type: string
              size:
                type: integer
                minimum: 1
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required:
            - name
            - size
            properties:
              name:
                description: >-
                  A name long enough not to be one of the short strings every
                  decode shares.
                type: string
              alias:
                description: >-
                  A name long enough not to be one of the short strings every
                  decode shares.
                type: string
              size:
                type: integer
                minimum: 1
    additionalPrinterColumns:
    - name: app
      type: string
  conversion:
    strategy: None
    labels:
      app: widget
`

func mapID(m any) unsafe.Pointer {
	v := m.(map[string]any)
	return *(*unsafe.Pointer)(unsafe.Pointer(&v))
}

func TestDecodeSharesRepeatsUnderTheSharedKey(t *testing.T) {
	raw, err := yaml.YAMLToJSON([]byte(sharedCRD))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal([]byte(sharedCRD), &want); err != nil {
		t.Fatal(err)
	}
	for name, decode := range map[string]func() (map[string]any, error){
		"YAML": func() (map[string]any, error) { return FromYAML([]byte(sharedCRD)) },
		"JSON": func() (map[string]any, error) { return Unmarshal(raw) },
	} {
		t.Run(name, func(t *testing.T) {
			got, err := decode()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(normalize(got), normalize(want)) {
				t.Fatalf("decoded %v\nwant %v", got, want)
			}
			versions := got["spec"].(map[string]any)["versions"].([]any)
			schema := func(i int) map[string]any {
				return versions[i].(map[string]any)["schema"].(map[string]any)[SharedKey].(map[string]any)
			}
			props := func(i int) map[string]any {
				return schema(i)["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)
			}
			// Equal schemas under the key are one, to their leaves.
			if mapID(schema(0)) != mapID(schema(1)) {
				t.Error("the two versions' equal schemas were decoded apart")
			}
			if mapID(props(0)["name"]) != mapID(props(0)["alias"]) {
				t.Error("equal property schemas in one version were decoded apart")
			}
			// Outside the key, equal maps stay apart.
			spec := got["spec"].(map[string]any)
			if mapID(got["metadata"].(map[string]any)["labels"]) == mapID(spec["conversion"].(map[string]any)["labels"]) {
				t.Error("equal maps outside the schema were shared")
			}
			if mapID(versions[0]) == mapID(versions[1]) {
				t.Error("the versions themselves were shared")
			}
			if _, ok := Owned(maxDepth, 1<<20, got); !ok {
				t.Error("Owned refused a decode's sharing under the key")
			}
			// Another decode of the same document shares nothing with it.
			again, err := decode()
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := Owned(maxDepth, 1<<20, got, again); !ok {
				t.Error("two decodes of one document share parts")
			}
		})
	}
}

// normalize makes yaml.Unmarshal's and jsonmap's numbers comparable.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case int64:
		return float64(x)
	case int:
		return float64(x)
	}
	return v
}

// A map under the key that repeats a key decodes as the standard decoders
// read it (the repeat is one member), never as an earlier map of as many
// members that holds one more: found by hash, a map is taken only when its
// members are the decoded ones exactly.
func TestSharedMapsWithRepeatedKeys(t *testing.T) {
	for name, doc := range map[string]string{
		"swapped pair": `{"openAPIV3Schema":{"x":{"a":"b","b":"a"},"y":{"a":"b","a":"b"}}}`,
		"key == value": `{"openAPIV3Schema":{"x":{"a":"a","b":"b"},"y":{"a":"a","a":"a"}}}`,
		"among others": `{"openAPIV3Schema":{"x":{"type":"string","format":"email","email":"format"},"y":{"type":"string","format":"email","format":"email"}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			var want map[string]any
			if err := utiljson.Unmarshal([]byte(doc), &want); err != nil {
				t.Fatal(err)
			}
			got, err := Unmarshal([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %v\nwant %v", got, want)
			}
		})
	}
	doc := `spec:
  openAPIV3Schema:
    properties:
      x:
        type: string
        format: email
        email: format
      w:
        type: string
        format: email
        format: email
`
	var want map[string]any
	if err := yaml.Unmarshal([]byte(doc), &want); err != nil {
		t.Fatal(err)
	}
	got, err := FromYAML([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normalize(got), normalize(want)) {
		t.Errorf("YAML: got %v\nwant %v", got, want)
	}
}
