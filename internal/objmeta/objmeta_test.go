package objmeta

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// reference is what stamping did with Unstructured's accessors.
func reference(o *unstructured.Unstructured, kv []string, del ...string) {
	l := o.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	for _, k := range del {
		delete(l, k)
	}
	o.SetLabels(l)
}

func TestSetAsTheAccessors(t *testing.T) {
	kv, del := []string{"owner", "bd", "managed", "Helm"}, []string{"dropped"}
	for _, tc := range []struct {
		name     string
		metadata any
	}{
		{"no metadata", nil},
		{"no labels", map[string]any{"name": "x"}},
		{"null labels", map[string]any{"labels": nil}},
		{"strings", map[string]any{"labels": map[string]any{"app": "web", "owner": "someone", "dropped": "x"}}},
		{"a null value", map[string]any{"labels": map[string]any{"app": nil}}},
		{"a number", map[string]any{"labels": map[string]any{"app": int64(1), "tier": "db"}}},
		{"labels not a map", map[string]any{"labels": "app=web"}},
		{"metadata not a map", "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := func() *unstructured.Unstructured {
				o := &unstructured.Unstructured{Object: map[string]any{"kind": "ConfigMap"}}
				if tc.metadata != nil {
					o.Object["metadata"] = deepCopy(tc.metadata)
				}
				return o
			}
			want, got := obj(), obj()
			reference(want, kv, del...)
			Set(got, "labels", kv, del...)
			if !reflect.DeepEqual(got.Object, want.Object) {
				t.Errorf("got %#v, want %#v", got.Object, want.Object)
			}
		})
	}
}

func TestSetInPlace(t *testing.T) {
	labels := map[string]any{"app": "web"}
	o := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"labels": labels}}}
	// The value boxed into the map's interface is the one allocation.
	if n := testing.AllocsPerRun(100, func() { Set(o, "labels", []string{"owner", "bd"}) }); n > 1 {
		t.Errorf("%.0f allocations to stamp a label, want at most 1", n)
	}
	if labels["owner"] != "bd" {
		t.Errorf("the map itself not stamped: %v", labels)
	}
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = deepCopy(x)
		}
		return out
	default:
		return v
	}
}
