package registry

import (
	"encoding/json"
	"fmt"
	"io/fs"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Objects is Render with the objects exactly as decoding Convert's
// manifests would give them (integers int64, lists []any, maps
// map[string]any), without writing them as YAML and parsing them back: an
// install with a config renders its objects straight from the bundle.
func Objects(fsys fs.FS, opts Options) ([]*unstructured.Unstructured, error) {
	objs, err := Render(fsys, opts)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		v, err := decodedForm(o.Object)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", o.GetKind(), o.GetName(), err)
		}
		o.Object = v.(map[string]any)
	}
	return objs, nil
}

// decodedForm returns v with the types apimachinery's JSON decoding gives:
// what v becomes once encoded and decoded again. The rendered maps and
// lists are this call's own, changed in place, each value replaced by its
// decoded form: a part decoding shares under a CRD's schema
// (jsonmap.SharedKey), met again, is left as it is.
func decodedForm(v any) (any, error) {
	switch v := v.(type) {
	case nil, string, bool, int64:
		return v, nil
	case map[string]any:
		for k, e := range v {
			d, err := decodedForm(e)
			if err != nil {
				return nil, err
			}
			v[k] = d
		}
		return v, nil
	case []any:
		for i, e := range v {
			d, err := decodedForm(e)
			if err != nil {
				return nil, err
			}
			v[i] = d
		}
		return v, nil
	case int:
		return int64(v), nil
	case int32:
		return int64(v), nil
	}
	// Floats (an integral one decodes as an integer) and any other type
	// (typed slices or maps): as encoding and decoding would give them.
	return roundTrip(v)
}

func roundTrip(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := utiljson.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	return out, nil
}
