package plain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Decode returns the objects held by one manifest file: a stream of YAML
// documents or JSON values. Empty documents are skipped and `kind: List`
// objects are flattened into their items. name is only used in errors, which
// also give the zero-based document index.
func Decode(name string, data []byte) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for doc := 0; ; doc++ {
		var raw json.RawMessage
		if err := reader.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decode %s: document %d: %w", name, doc, err)
		}
		// apimachinery's JSON keeps integers int64, as every other
		// unstructured object in Kubernetes has them.
		if len(raw) == 0 {
			continue // an empty document
		}
		var fields map[string]interface{}
		if err := utiljson.Unmarshal(raw, &fields); err != nil {
			return nil, fmt.Errorf("decode %s: document %d: %w", name, doc, err)
		}
		if len(fields) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{Object: fields}
		if obj.IsList() {
			items, err := listItems(obj)
			if err != nil {
				return nil, fmt.Errorf("decode %s: document %d: %w", name, doc, err)
			}
			for i, item := range items {
				if err := checkObject(item); err != nil {
					return nil, fmt.Errorf("decode %s: document %d: item %d: %w", name, doc, i, err)
				}
			}
			objs = append(objs, items...)
			continue
		}
		if err := checkObject(obj); err != nil {
			return nil, fmt.Errorf("decode %s: document %d: %w", name, doc, err)
		}
		objs = append(objs, obj)
	}
}

func listItems(list *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	raw, ok := list.Object["items"]
	if !ok || raw == nil {
		return nil, nil
	}
	items, ok := raw.([]interface{})
	if !ok {
		return nil, fmt.Errorf("%s items must be a list, not %T", list.GetKind(), raw)
	}
	objs := make([]*unstructured.Unstructured, 0, len(items))
	for i, item := range items {
		m, ok := item.(map[string]interface{})
		if !ok {
			return nil, fmt.Errorf("item %d must be an object, not %T", i, item)
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs, nil
}

// checkObject rejects documents that cannot be applied, so a bundle fails at
// unpack time rather than at install time.
func checkObject(obj *unstructured.Unstructured) error {
	var missing []string
	if obj.GetAPIVersion() == "" {
		missing = append(missing, "apiVersion")
	}
	if obj.GetKind() == "" {
		missing = append(missing, "kind")
	}
	if obj.GetName() == "" {
		missing = append(missing, "metadata.name")
	}
	if len(missing) > 0 {
		return fmt.Errorf("object is missing required fields: %s", strings.Join(missing, ", "))
	}
	return nil
}
