// Package objmeta stamps labels and annotations onto decoded objects in
// place.
//
// Unstructured's GetLabels and SetLabels copy the map twice (into a
// map[string]string and back), and stamping every object of a release on
// every reconcile did that four times per object: a few percent of all
// that a restart of 10,000 BundleDeployments allocated.
package objmeta

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// Set sets o's metadata.<field> (labels or annotations) keys to values
// (kv: key, value, key, value...) and deletes the keys in del. It changes
// the map in place when it holds strings only, as decoded metadata does;
// otherwise it does what GetLabels and SetLabels would (a map holding
// another value is read as empty, a null value as "").
func Set(o *unstructured.Unstructured, field string, kv []string, del ...string) {
	if m, ok := stringsOnly(o, field); ok {
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		for _, k := range del {
			delete(m, k)
		}
		return
	}
	cur, _, _ := unstructured.NestedNullCoercingStringMap(o.Object, "metadata", field)
	if cur == nil {
		cur = make(map[string]string, len(kv)/2)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		cur[kv[i]] = kv[i+1]
	}
	for _, k := range del {
		delete(cur, k)
	}
	_ = unstructured.SetNestedStringMap(o.Object, cur, "metadata", field)
}

// stringsOnly returns o's metadata.<field> map if it exists and holds
// strings only.
func stringsOnly(o *unstructured.Unstructured, field string) (map[string]any, bool) {
	md, ok := o.Object["metadata"].(map[string]any)
	if !ok {
		return nil, false
	}
	m, ok := md[field].(map[string]any)
	if !ok || m == nil {
		return nil, false
	}
	for _, v := range m {
		if _, ok := v.(string); !ok {
			return nil, false
		}
	}
	return m, true
}
