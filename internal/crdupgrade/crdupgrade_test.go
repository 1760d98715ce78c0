package crdupgrade

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// pagedLister serves objects (given at the storage version) in pages, as
// the API server does, and records the pages asked for.
type pagedLister struct {
	objs     []map[string]any
	calls    int
	maxLimit int64
	limits   []int64
}

func (l *pagedLister) ListJSON(_ context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (io.ReadCloser, error) {
	l.calls++
	l.maxLimit = max(l.maxLimit, opts.Limit)
	l.limits = append(l.limits, opts.Limit)
	start := 0
	if opts.Continue != "" {
		var err error
		if start, err = strconv.Atoi(opts.Continue); err != nil {
			return nil, err
		}
	}
	end := min(len(l.objs), start+int(opts.Limit))
	return listJSON(gvr, l.objs[start:end], end, len(l.objs))
}

// listJSON encodes objs as the API server does a page of a list (keys
// sorted: the list's metadata after its items), relabelled to gvr's
// version, continuing at end if that is before total.
func listJSON(gvr schema.GroupVersionResource, objs []map[string]any, end, total int) (io.ReadCloser, error) {
	items := []any{}
	for _, o := range objs {
		u := unstructured.Unstructured{Object: deepCopy(o)}
		u.SetAPIVersion(gvr.Group + "/" + gvr.Version)
		items = append(items, u.Object)
	}
	meta := map[string]any{"resourceVersion": "1"}
	if end < total {
		meta["continue"] = strconv.Itoa(end)
	}
	b, err := json.Marshal(map[string]any{"apiVersion": gvr.Group + "/" + gvr.Version, "kind": "WidgetList", "metadata": meta, "items": items})
	return io.NopCloser(bytes.NewReader(b)), err
}

func deepCopy(o map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: o}).DeepCopy().Object
}

func widget(name string, spec map[string]any) map[string]any {
	o := map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": name, "namespace": "default"},
	}
	if spec != nil {
		o["spec"] = spec
	}
	return o
}

const baseSchema = `
type: object
properties:
  spec:
    type: object
    properties:
      size: {type: integer}
      mode: {type: string, enum: [a, b]}
      name: {type: string}
`

// edit returns baseSchema with the spec's properties replaced by the given
// YAML lines (indented as properties of spec), plus extra lines for spec.
func edit(props string, specExtra string) string {
	s := `
type: object
properties:
  spec:
    type: object
` + specExtra + `
    properties:
` + props
	return s
}

func schemaProps(t *testing.T, y string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	s := &apiextensionsv1.JSONSchemaProps{}
	if err := yaml.Unmarshal([]byte(y), s); err != nil {
		t.Fatalf("schema: %v\n%s", err, y)
	}
	return s
}

type version struct {
	name            string
	served, storage bool
	schema          string
}

func crd(t *testing.T, scope apiextensionsv1.ResourceScope, stored []string, versions ...version) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	c := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: scope,
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: stored},
	}
	for _, v := range versions {
		c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v.name, Served: v.served, Storage: v.storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: schemaProps(t, v.schema)},
		})
	}
	return c
}

func v1(schema string) version {
	return version{name: "v1", served: true, storage: true, schema: schema}
}

const ns, cluster = apiextensionsv1.NamespaceScoped, apiextensionsv1.ClusterScoped

func TestChecks(t *testing.T) {
	stored := []string{"v1"}
	base := func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
		return crd(t, ns, stored, v1(baseSchema))
	}
	const prefix = "CRD upgrade preflight failed: CRD widgets.example.com: "
	sizeIntProps := "      size: {type: integer}\n      mode: {type: string, enum: [a, b]}\n      name: {type: string}\n"
	for _, tc := range []struct {
		name     string
		old, new func(t *testing.T) *apiextensionsv1.CustomResourceDefinition
		objs     []map[string]any
		// want is the exact condition message; "" when the upgrade passes.
		want string
		// finding is the one finding a passing case reports ("" for none).
		finding string
	}{{
		name: "ScopeChanged fails",
		old:  base,
		new: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, cluster, nil, v1(baseSchema))
		},
		want: prefix + "ScopeChanged: scope changed from Namespaced to Cluster",
	}, {
		name: "ScopeChanged passes: same scope, same schema",
		old:  base, new: base,
		objs: []map[string]any{widget("a", nil)},
	}, {
		name: "StoredVersionRemoved fails",
		old: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, []string{"v1alpha1", "v1"}, version{name: "v1alpha1", served: true, schema: baseSchema}, v1(baseSchema))
		},
		new:  base,
		want: prefix + "StoredVersionRemoved in v1alpha1: version v1alpha1 removed while status.storedVersions lists it (objects may still be stored in it)",
	}, {
		name: "StoredVersionRemoved passes: v1alpha1 served but never stored, no objects",
		old: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, stored, version{name: "v1alpha1", served: true, schema: baseSchema}, v1(baseSchema))
		},
		new:     base,
		finding: "ServedVersionRemoved in v1alpha1: version v1alpha1 no longer served",
	}, {
		name: "ServedVersionRemoved fails: objects exist",
		old: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, stored, version{name: "v1alpha1", served: true, schema: baseSchema}, v1(baseSchema))
		},
		new: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, stored, version{name: "v1alpha1", served: false, schema: baseSchema}, v1(baseSchema))
		},
		objs: []map[string]any{widget("a", nil), widget("b", nil)},
		want: prefix + "ServedVersionRemoved in v1alpha1: version v1alpha1 no longer served; 2 existing objects affected: default/a, default/b",
	}, {
		name: "RequiredFieldAdded fails",
		old:  base,
		new: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, stored, v1(edit(sizeIntProps, "    required: [name]")))
		},
		objs: []map[string]any{widget("a", map[string]any{"name": "x"}), widget("b", map[string]any{"size": int64(1)})},
		want: prefix + "RequiredFieldAdded in v1 spec.name: required field added; 1 existing object affected: default/b (spec.name: Required value)",
	}, {
		name: "RequiredFieldAdded passes: every object sets it",
		old:  base,
		new: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, stored, v1(edit(sizeIntProps, "    required: [name]")))
		},
		objs:    []map[string]any{widget("a", map[string]any{"name": "x"})},
		finding: "RequiredFieldAdded in v1 spec.name: required field added",
	}, {
		name: "FieldRemoved fails",
		old:  base,
		new: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, stored, v1(edit("      mode: {type: string, enum: [a, b]}\n      name: {type: string}\n", "")))
		},
		objs: []map[string]any{widget("a", map[string]any{"size": int64(3)}), widget("b", map[string]any{"name": "x"})},
		want: prefix + "FieldRemoved in v1 spec.size: field removed; 1 existing object affected: default/a (spec.size: field would be dropped)",
	}, {
		name: "FieldRemoved passes: no object sets it",
		old:  base,
		new: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, stored, v1(edit("      mode: {type: string, enum: [a, b]}\n      name: {type: string}\n", "")))
		},
		objs:    []map[string]any{widget("b", map[string]any{"name": "x"})},
		finding: "FieldRemoved in v1 spec.size: field removed",
	}, {
		name: "TypeChanged fails",
		old:  base,
		new: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, stored, v1(edit("      size: {type: string}\n      mode: {type: string, enum: [a, b]}\n      name: {type: string}\n", "")))
		},
		objs: []map[string]any{widget("a", map[string]any{"size": int64(3)})},
		want: prefix + `TypeChanged in v1 spec.size: type changed from integer to string; 1 existing object affected: default/a (spec.size: Invalid value: "integer": spec.size in body must be of type string: "integer")`,
	}, {
		name: "TypeChanged passes: no object sets it",
		old:  base,
		new: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, stored, v1(edit("      size: {type: string}\n      mode: {type: string, enum: [a, b]}\n      name: {type: string}\n", "")))
		},
		objs:    []map[string]any{widget("a", map[string]any{"name": "x"})},
		finding: "TypeChanged in v1 spec.size: type changed from integer to string",
	}, {
		name: "EnumNarrowed fails",
		old:  base,
		new: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, stored, v1(edit("      size: {type: integer}\n      mode: {type: string, enum: [a]}\n      name: {type: string}\n", "")))
		},
		objs: []map[string]any{widget("a", map[string]any{"mode": "a"}), widget("b", map[string]any{"mode": "b"})},
		want: prefix + `EnumNarrowed in v1 spec.mode: enum values removed: "b"; 1 existing object affected: default/b (spec.mode: Unsupported value: "b": supported values: "a")`,
	}, {
		name: "EnumNarrowed passes: no object uses the removed value",
		old:  base,
		new: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, stored, v1(edit("      size: {type: integer}\n      mode: {type: string, enum: [a]}\n      name: {type: string}\n", "")))
		},
		objs:    []map[string]any{widget("a", map[string]any{"mode": "a"})},
		finding: `EnumNarrowed in v1 spec.mode: enum values removed: "b"`,
	}, {
		name: "DefaultChanged fails: an object holds the old default",
		old: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, stored, v1(edit("      size: {type: integer, default: 1}\n      mode: {type: string, enum: [a, b]}\n      name: {type: string}\n", "")))
		},
		new: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, stored, v1(edit("      size: {type: integer, default: 2}\n      mode: {type: string, enum: [a, b]}\n      name: {type: string}\n", "")))
		},
		objs: []map[string]any{widget("a", map[string]any{"size": int64(1)}), widget("b", map[string]any{"size": int64(5)})},
		want: prefix + "DefaultChanged in v1 spec.size: default changed from 1 to 2; 1 existing object affected: default/a (spec.size: holds the old default 1)",
	}, {
		name: "DefaultChanged passes: no object holds the old default",
		old: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, stored, v1(edit("      size: {type: integer, default: 1}\n      mode: {type: string, enum: [a, b]}\n      name: {type: string}\n", "")))
		},
		new: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, stored, v1(edit("      size: {type: integer}\n      mode: {type: string, enum: [a, b]}\n      name: {type: string}\n", "")))
		},
		objs:    []map[string]any{widget("b", map[string]any{"size": int64(5)})},
		finding: "DefaultChanged in v1 spec.size: default removed (was 1)",
	}, {
		name: "DefaultChanged passes: a default added never fails",
		old:  base,
		new: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, stored, v1(edit("      size: {type: integer, default: 1}\n      mode: {type: string, enum: [a, b]}\n      name: {type: string}\n", "")))
		},
		objs:    []map[string]any{widget("a", map[string]any{"size": int64(2)}), widget("b", map[string]any{"name": "x"})},
		finding: "DefaultChanged in v1 spec.size: default added: 1",
	}, {
		name: "BoundsChanged fails",
		old:  base,
		new: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, stored, v1(edit("      size: {type: integer, maximum: 10}\n      mode: {type: string, enum: [a, b]}\n      name: {type: string}\n", "")))
		},
		objs: []map[string]any{widget("a", map[string]any{"size": int64(20)}), widget("b", map[string]any{"size": int64(5)})},
		want: prefix + "BoundsChanged in v1 spec.size: maximum added: 10; 1 existing object affected: default/a (spec.size: Invalid value: 20: spec.size in body should be less than or equal to 10)",
	}, {
		name: "BoundsChanged passes: every object within the bound",
		old:  base,
		new: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, stored, v1(edit("      size: {type: integer, maximum: 10}\n      mode: {type: string, enum: [a, b]}\n      name: {type: string}\n", "")))
		},
		objs:    []map[string]any{widget("b", map[string]any{"size": int64(5)})},
		finding: "BoundsChanged in v1 spec.size: maximum added: 10",
	}, {
		name: "UnknownChange fails: a CEL rule an object breaks",
		old:  base,
		new: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, stored, v1(edit(sizeIntProps, "    x-kubernetes-validations:\n    - rule: \"!has(self.name) || self.name.startsWith('x')\"\n      message: name must start with x")))
		},
		objs: []map[string]any{widget("a", map[string]any{"name": "xa"}), widget("b", map[string]any{"name": "yb"})},
		want: prefix + `UnknownChange in v1 spec: x-kubernetes-validations changed; 1 existing object affected: default/b (spec: Invalid value: name must start with x)`,
	}, {
		name: "UnknownChange passes: every object meets the new CEL rule",
		old:  base,
		new: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return crd(t, ns, stored, v1(edit(sizeIntProps, "    x-kubernetes-validations:\n    - rule: \"!has(self.name) || self.name.startsWith('x')\"\n      message: name must start with x")))
		},
		objs:    []map[string]any{widget("a", map[string]any{"name": "xa"}), widget("c", nil)},
		finding: "UnknownChange in v1 spec: x-kubernetes-validations changed",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			l := &pagedLister{objs: tc.objs}
			r, err := Compare(context.Background(), l, tc.old(t), tc.new(t), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := Message([]*Report{r}); got != tc.want {
				t.Errorf("message:\n got %s\nwant %s", got, tc.want)
			}
			if tc.want != "" {
				return
			}
			var got []string
			for _, f := range r.Findings {
				got = append(got, f.String())
			}
			want := []string(nil)
			if tc.finding != "" {
				want = []string{tc.finding}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("findings:\n got %q\nwant %q", got, want)
			}
		})
	}
}

// A new version (no conversion webhook) is checked against the objects read
// at the old storage version, relabelled.
func TestNewVersionValidatesExistingObjects(t *testing.T) {
	old := crd(t, ns, []string{"v1"}, v1(baseSchema))
	v2 := edit("      size: {type: integer, minimum: 5}\n      mode: {type: string, enum: [a, b]}\n      name: {type: string}\n", "")
	new := crd(t, ns, []string{"v1"}, v1(baseSchema), version{name: "v2", served: true, schema: v2})
	l := &pagedLister{objs: []map[string]any{widget("small", map[string]any{"size": int64(1)}), widget("big", map[string]any{"size": int64(9)})}}
	r, err := Compare(context.Background(), l, old, new, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := "CRD upgrade preflight failed: CRD widgets.example.com: BoundsChanged in v2 spec.size: minimum added: 5; 1 existing object affected: default/small (spec.size: Invalid value: 1: spec.size in body should be greater than or equal to 5)"
	if got := Message([]*Report{r}); got != want {
		t.Errorf("message:\n got %s\nwant %s", got, want)
	}
}

// Objects are read in pages of the configured size, and a message about
// thousands of offending objects with long names stays small.
func TestPagesAndBoundedMessage(t *testing.T) {
	var objs []map[string]any
	for i := range 2345 {
		objs = append(objs, widget(fmt.Sprintf("%s-%04d", strings.Repeat("n", 240), i), map[string]any{"mode": "b", "size": int64(99), "name": "y"}))
	}
	l := &pagedLister{objs: objs}
	narrow := "      size: {type: integer, maximum: 10}\n      mode: {type: string, enum: [a]}\n      name: {type: string, maxLength: 0}\n      extra: {type: string}\n"
	r, err := Compare(context.Background(), l, crd(t, ns, []string{"v1"}, v1(baseSchema)),
		crd(t, ns, []string{"v1"}, v1(edit(narrow, "    required: [extra]"))), Options{PageSize: 100, MaxListed: 7})
	if err != nil {
		t.Fatal(err)
	}
	// The first page asks for PageBytes of objects of MaxObjectBytes (2),
	// the others for PageSize (small objects).
	if l.calls != 25 || l.maxLimit != 100 {
		t.Errorf("list calls %d with limit up to %d, want 25 with 100", l.calls, l.maxLimit)
	}
	failed := r.Failed()
	if len(failed) != 4 {
		t.Fatalf("failed findings: %d, want 4", len(failed))
	}
	for _, f := range failed {
		if f.Count != 2345 || len(f.Objects) != 7 {
			t.Errorf("%s: count %d, listed %d; want 2345, 7", f.Check, f.Count, len(f.Objects))
		}
	}
	msg := Message([]*Report{r})
	if len(msg) > maxMessage {
		t.Errorf("message is %d bytes", len(msg))
	}
	if !strings.Contains(msg, "; and 1 more failing check") || !strings.Contains(msg, " and 2340 more") {
		t.Errorf("message does not summarise the rest: %s", msg)
	}
	offenders, unlisted := Offenders([]*Report{r}, 5)
	if len(offenders) != 5 || len(offenders[0].Findings) != 4 || unlisted != 4*2338+2*4 {
		t.Errorf("offenders %d (first with %d findings), unlisted %d", len(offenders), len(offenders[0].Findings), unlisted)
	}
}

func TestParseFieldPath(t *testing.T) {
	for in, want := range map[string]string{
		"spec.ports[0].name":                  "spec.ports[*].name",
		"spec.labels[app.kubernetes.io/name]": "spec.labels[*]",
		"":                                    "<root>",
		"metadata.name":                       "metadata.name",
	} {
		if got := parseFieldPath(in).String(); got != want {
			t.Errorf("parseFieldPath(%q) = %s, want %s", in, got, want)
		}
	}
}

// stuckLister answers no list until the check gives up.
type stuckLister struct{}

func (stuckLister) ListJSON(ctx context.Context, _ schema.GroupVersionResource, _ metav1.ListOptions) (io.ReadCloser, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestTimeout(t *testing.T) {
	old := crd(t, ns, []string{"v1"}, v1(baseSchema))
	new := crd(t, ns, []string{"v1"}, v1(edit("      mode: {type: string}\n", "")))
	_, err := Compare(context.Background(), stuckLister{}, old, new, Options{Timeout: 10 * time.Millisecond})
	want := "checking the objects of CRD widgets.example.com at version v1: checking the objects took longer than 10ms"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

func TestHolding(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{
		"ports":  []any{map[string]any{"protocol": "TCP"}, map[string]any{"protocol": "UDP"}, map[string]any{"protocol": "TCP"}},
		"labels": map[string]any{"a": "x", "b": "y"},
		"opts":   map[string]any{"k": int64(1), "m": map[string]any{"z": true}},
	}}
	for _, tc := range []struct {
		path  Path
		value string
		want  string
	}{
		{Path{"spec", "ports", "*", "protocol"}, `"TCP"`, "[spec.ports[0].protocol spec.ports[2].protocol]"},
		{Path{"spec", "labels", "*"}, `"y"`, "[spec.labels.b]"},
		{Path{"spec", "opts", "k"}, `1`, "[spec.opts.k]"},
		{Path{"spec", "opts", "m"}, `{"z":true}`, "[spec.opts.m]"},
		{Path{"spec", "missing", "x"}, `1`, "[]"},
	} {
		if got := fmt.Sprint(holding(obj, tc.path, nil, tc.value)); got != tc.want {
			t.Errorf("holding(%s, %s) = %s, want %s", tc.path, tc.value, got, tc.want)
		}
	}
}
