package plain

import (
	"encoding/json"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// YAML 1.1 reads unquoted y/n/yes/no/on/off as booleans. A plain bundle is
// applied as kubectl apply would send it, so its manifests must decode to
// the same JSON as sigs.k8s.io/yaml's YAMLToJSON (what kubectl's decoder
// runs): quoted values stay strings, unquoted ones are whatever kubectl
// makes of them, never something else.
func TestDecodeScalarsAsKubectl(t *testing.T) {
	tests := []struct {
		value string // as written after "k: " in a ConfigMap's data
		want  any
	}{
		{`"n"`, "n"},
		{`"on"`, "on"},
		{`"yes"`, "yes"},
		{`'off'`, "off"},
		{`"y"`, "y"},
		{`"no"`, "no"},
		{`"true"`, "true"},
		{`"~"`, "~"},
		{`"0777"`, "0777"},
		{`"1e3"`, "1e3"},
		{`"2024-01-01"`, "2024-01-01"},
		{`"12:30"`, "12:30"},
		{`|-` + "\n    yes", "yes"},
		{`n`, false},
		{`yes`, true},
		{`on`, true},
		{`off`, false},
		{`maybe`, "maybe"},
		{`~`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			doc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: " + tt.value + "\n"
			objs, err := Decode("c.yaml", []byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			got := objs[0].Object["data"].(map[string]any)["k"]
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("data.k = %#v (%T), want %#v (%T)", got, got, tt.want, tt.want)
			}
			kubectlJSON, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			var kubectl map[string]any
			if err := json.Unmarshal(kubectlJSON, &kubectl); err != nil {
				t.Fatal(err)
			}
			if want := kubectl["data"].(map[string]any)["k"]; !reflect.DeepEqual(got, want) {
				t.Errorf("data.k = %#v, sigs.k8s.io/yaml (kubectl) decodes %#v", got, want)
			}
			if s, ok := got.(string); ok {
				// rukpakctl render and the registry+v1 conversion write
				// objects with sigs.k8s.io/yaml; the text must decode back
				// to the same string, not to a bool.
				text, err := yaml.Marshal(objs[0].Object)
				if err != nil {
					t.Fatal(err)
				}
				again, err := Decode("again.yaml", text)
				if err != nil {
					t.Fatal(err)
				}
				if back := again[0].Object["data"].(map[string]any)["k"]; back != s {
					t.Errorf("after sigs.k8s.io/yaml.Marshal: data.k = %#v, want %q\n%s", back, s, text)
				}
			}
		})
	}
}
