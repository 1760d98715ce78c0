package helmvalues

import (
	"reflect"
	"strings"
	"testing"
)

func TestFromConfig(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config string
		want   []Source
		err    string // the errors, joined by "; "
	}{
		{name: "no config", config: ``},
		{name: "no valuesFrom", config: `{"installNamespace":"apps","values":"a: 1"}`},
		{name: "other members are not checked", config: `{"installNamespace":5,"valuse":"x"}`},
		{name: "empty list", config: `{"valuesFrom":[]}`, want: []Source{}},
		{
			name:   "both kinds",
			config: `{"installNamespace":"apps","valuesFrom":[{"kind":"Secret","name":"s","key":"v.yaml","optional":true},{"kind":"ConfigMap","name":"c.d"}]}`,
			want:   []Source{{Kind: "Secret", Name: "s", Key: "v.yaml", Optional: true}, {Kind: "ConfigMap", Name: "c.d"}},
		},
		{
			// encoding/json matches keys case-insensitively and keeps the
			// last duplicate, as the provisioner's decoding does: the
			// webhook may not review one list and the provisioner read
			// another.
			name:   "keys matched as the provisioner matches them",
			config: `{"valuesFrom":[{"kind":"ConfigMap","name":"a"}],"VALUESFROM":[{"KIND":"Secret","Name":"b"}]}`,
			want:   []Source{{Kind: "Secret", Name: "b"}},
		},
		{name: "not a list", config: `{"valuesFrom":"team-b-values"}`,
			err: "spec.config: Invalid value: valuesFrom must be a list of {kind, name, key, optional}: json: cannot unmarshal string into Go struct field config.valuesFrom of type []helmvalues.Source"},
		{name: "optional not a bool", config: `{"valuesFrom":[{"kind":"Secret","name":"s","optional":"yes"}]}`,
			err: "spec.config: Invalid value: valuesFrom must be a list of {kind, name, key, optional}: json: cannot unmarshal string into Go struct field Source.valuesFrom.optional of type bool"},
		{name: "unknown kind", config: `{"valuesFrom":[{"kind":"Pod","name":"p"}]}`,
			err: `spec.config.valuesFrom[0].kind: Unsupported value: "Pod": supported values: "ConfigMap", "Secret"`},
		{name: "no kind", config: `{"valuesFrom":[{"name":"p"}]}`,
			err: `spec.config.valuesFrom[0].kind: Unsupported value: "": supported values: "ConfigMap", "Secret"`},
		{name: "long kind is cut", config: `{"valuesFrom":[{"kind":"` + strings.Repeat("k", 100) + `","name":"p"}]}`,
			err: `spec.config.valuesFrom[0].kind: Unsupported value: "` + strings.Repeat("k", 64) + `...": supported values: "ConfigMap", "Secret"`},
		{name: "no name", config: `{"valuesFrom":[{"kind":"Secret"}]}`,
			err: `spec.config.valuesFrom[0].name: Required value: the ConfigMap's or Secret's name`},
		{name: "name with a path", config: `{"valuesFrom":[{"kind":"ConfigMap","name":"../x"}]}`,
			err: `spec.config.valuesFrom[0].name: Invalid value: "../x": a lowercase RFC 1123 subdomain must consist of`},
		{name: "name too long", config: `{"valuesFrom":[{"kind":"ConfigMap","name":"` + strings.Repeat("n", 254) + `"}]}`,
			err: `spec.config.valuesFrom[0].name: Too long: may not be more than 253 bytes`},
		{name: "key with a path", config: `{"valuesFrom":[{"kind":"ConfigMap","name":"x","key":"a/b"}]}`,
			err: `spec.config.valuesFrom[0].key: Invalid value: "a/b": a valid config key must consist of`},
		{name: "key too long", config: `{"valuesFrom":[{"kind":"ConfigMap","name":"x","key":"` + strings.Repeat("k", 254) + `"}]}`,
			err: `spec.config.valuesFrom[0].key: Too long: may not be more than 253 bytes`},
		{name: "every problem named", config: `{"valuesFrom":[{"kind":"ConfigMap","name":"ok"},{"kind":"Pod","name":"A"}]}`,
			err: `spec.config.valuesFrom[1].kind: Unsupported value: "Pod": supported values: "ConfigMap", "Secret"; spec.config.valuesFrom[1].name: Invalid value: "A": a lowercase RFC 1123 subdomain`},
		{name: "at most 16", config: `{"valuesFrom":[` + strings.Repeat(`{"kind":"ConfigMap","name":"x"},`, 16) + `{"kind":"ConfigMap","name":"x"}]}`,
			err: "spec.config.valuesFrom: Too many: 17: must have at most 16 items"},
		{name: "16 is fine", config: `{"valuesFrom":[` + strings.Repeat(`{"kind":"ConfigMap","name":"x"},`, 15) + `{"kind":"ConfigMap","name":"x"}]}`,
			want: func() []Source {
				s := make([]Source, 16)
				for i := range s {
					s[i] = Source{Kind: "ConfigMap", Name: "x"}
				}
				return s
			}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := FromConfig([]byte(tc.config))
			if tc.err == "" {
				if len(errs) > 0 {
					t.Fatalf("errors %v", errs)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("sources %#v, want %#v", got, tc.want)
				}
				return
			}
			msgs := make([]string, len(errs))
			for i, e := range errs {
				msgs[i] = e.Error()
			}
			if joined := strings.Join(msgs, "; "); !strings.HasPrefix(joined, tc.err) {
				t.Fatalf("errors\n %s\nwant\n %s", joined, tc.err)
			}
			if got != nil {
				t.Fatalf("sources %v with errors", got)
			}
		})
	}
}

func TestDataKey(t *testing.T) {
	for _, tc := range []struct{ key, want string }{{"", "values.yaml"}, {"prod.yaml", "prod.yaml"}} {
		if got := (Source{Key: tc.key}).DataKey(); got != tc.want {
			t.Errorf("DataKey of %q = %q, want %q", tc.key, got, tc.want)
		}
	}
}
