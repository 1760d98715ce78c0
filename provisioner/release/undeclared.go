package release

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Fields the API server's schema does not declare: a Deployment volume with
// `secretName` beside `secret` instead of in it, a v1 CRD still carrying
// v1beta1's `spec.version`, a custom resource with a field its CRD lacks.
// A create or update (what Helm and OLM send) drops them with a warning;
// server-side apply refuses the whole object, since it cannot own a field
// it has no schema for. So an object refused that way is applied again
// without those fields, which the API server names (a strict dry-run
// create), and the object records them in AnnotationDroppedFields: its
// desired state from then on is the object without them, which keeps the
// provisioner the owner of exactly the fields on the cluster and gives
// drift detection nothing to correct.

// AnnotationDroppedFields lists, as a JSON array of field paths, the fields
// of a bundle's object that the provisioner left out because the API
// server's schema does not declare them. The provisioner sets it; a
// bundle's own value is discarded.
const AnnotationDroppedFields = "core.rukpak.io/dropped-fields"

// DroppedFields are the fields left out of one object.
type DroppedFields struct {
	// Object is "Kind namespace/name" (or "Kind name"); Ref refers to it.
	Object string
	Ref    corev1.ObjectReference
	// Fields are paths as the API server writes them, e.g.
	// spec.template.spec.volumes[0].secretName.
	Fields []string
}

// maxDropped bounds the fields one object may be applied without. The API
// server names at most 100 unknown fields of a built-in kind per request
// (its JSON decoder stops counting there), so this also bounds the dry runs.
const maxDropped = 1000

// applyDropping applies o and, if the API server refuses fields its schema
// does not declare, applies it again without them. On success o is what was
// applied (without the fields, with AnnotationDroppedFields) and the
// dropped fields are returned. body is o's JSON, or nil (applyObject).
func applyDropping(ctx context.Context, c client.Client, o *unstructured.Unstructured, body []byte) (dropped []string, at Applied, err error) {
	at, applyErr := applyObject(ctx, c, o, body)
	if applyErr == nil || !notDeclared(applyErr) {
		return nil, at, applyErr
	}
	pruned := o.DeepCopy()
	for round := 0; ; round++ {
		fields, err := undeclaredFields(ctx, c, pruned)
		if err != nil {
			return nil, Applied{}, fmt.Errorf("%w (asking which fields the schema does not declare: %w)", applyErr, err)
		}
		if len(fields) == 0 {
			break
		}
		if !dropAll(pruned.Object, fields) {
			return nil, Applied{}, fmt.Errorf("%w (the API server names undeclared fields that are not in the object: %s)", applyErr, listFields(fields))
		}
		dropped = append(dropped, fields...)
		if len(dropped) > maxDropped || round == maxDropped/100 {
			return nil, Applied{}, fmt.Errorf("%w (more than %d fields the schema does not declare: %s)", applyErr, maxDropped, listFields(dropped))
		}
	}
	if len(dropped) == 0 {
		// The strict decoder accepts what apply refuses: nothing to drop.
		return nil, Applied{}, applyErr
	}
	slices.Sort(dropped)
	recorded, err := json.Marshal(dropped)
	if err != nil {
		return nil, Applied{}, err
	}
	ann := pruned.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationDroppedFields] = string(recorded)
	pruned.SetAnnotations(ann)
	if at, err = applyObject(ctx, c, pruned, nil); err != nil {
		return nil, Applied{}, fmt.Errorf("without the fields the schema does not declare (%s): %w", listFields(dropped), err)
	}
	o.Object = pruned.Object
	return dropped, at, nil
}

// listFields lists the first few of fields for a message.
func listFields(fields []string) string {
	const shown = 10
	list := strings.Join(fields[:min(len(fields), shown)], ", ")
	if len(fields) > shown {
		list += fmt.Sprintf(" and %d more", len(fields)-shown)
	}
	return list
}

// notDeclared says whether err is server-side apply refusing a field the
// schema does not declare (structured-merge-diff's message).
func notDeclared(err error) bool {
	return strings.Contains(err.Error(), "field not declared in schema")
}

// undeclaredFields asks the API server which fields of o its schema does
// not declare, with a dry-run create under strict field validation. The
// object is decoded, and unknown fields reported, before anything else is
// checked, so an object that exists already is answered too.
func undeclaredFields(ctx context.Context, c client.Client, o *unstructured.Unstructured) ([]string, error) {
	err := c.Create(ctx, o.DeepCopy(), client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict))
	if err == nil {
		return nil, nil
	}
	if status := apierrors.APIStatus(nil); !errors.As(err, &status) {
		return nil, err
	}
	// Any other refusal comes after decoding, which found nothing unknown.
	return unknownFields(err.Error()), nil
}

const strictPrefix = "strict decoding error: "

// unknownFields reads the paths out of a strict decoding error: `strict
// decoding error: unknown field "a.b", unknown field "c[0].d"` (built-in
// kinds quote with strconv.Quote, custom resources with "%s", which agree
// on ordinary keys; other strict errors, such as duplicate fields, are
// skipped).
func unknownFields(msg string) []string {
	i := strings.Index(msg, strictPrefix)
	if i < 0 {
		return nil
	}
	rest := msg[i+len(strictPrefix):]
	var fields []string
	for rest != "" {
		if after, ok := strings.CutPrefix(rest, `unknown field `); ok {
			quoted, err := strconv.QuotedPrefix(after)
			if err != nil {
				break
			}
			f, err := strconv.Unquote(quoted)
			if err != nil {
				break
			}
			fields = append(fields, f)
			rest = after[len(quoted):]
		} else {
			j := strings.Index(rest, ", ")
			if j < 0 {
				break
			}
			rest = rest[j:]
		}
		var ok bool
		if rest, ok = strings.CutPrefix(rest, ", "); !ok {
			break
		}
	}
	return fields
}

// dropSteps bounds the work of finding one path: keys may hold dots, so a
// path can be read several ways, and a hostile object could nest keys that
// make the ways many.
const dropSteps = 10_000

// dropField deletes the field at path (dot-separated keys, [i] for list
// items, as the API server writes them) from obj, and says whether it was
// there.
func dropField(obj map[string]any, path string) bool {
	steps := dropSteps
	return drop(obj, path, &steps)
}

func drop(node any, path string, steps *int) bool {
	if *steps--; *steps < 0 {
		return false
	}
	switch n := node.(type) {
	case map[string]any:
		// The key is the path up to some '.' or '[' (or all of it).
		for end := 0; end <= len(path); end++ {
			if end < len(path) && path[end] != '.' && path[end] != '[' {
				continue
			}
			v, ok := n[path[:end]]
			if !ok {
				continue
			}
			rest := path[end:]
			switch {
			case rest == "":
				delete(n, path[:end])
				return true
			case rest[0] == '.':
				rest = rest[1:]
			}
			if drop(v, rest, steps) {
				return true
			}
		}
	case []any:
		inner, ok := strings.CutPrefix(path, "[")
		j := strings.IndexByte(inner, ']')
		if !ok || j < 0 {
			return false
		}
		i, err := strconv.Atoi(inner[:j])
		if err != nil || i < 0 || i >= len(n) {
			return false
		}
		rest := inner[j+1:]
		switch {
		case strings.HasPrefix(rest, "."):
			return drop(n[i], rest[1:], steps)
		case strings.HasPrefix(rest, "["):
			return drop(n[i], rest, steps)
		}
	}
	return false
}

// droppedFields reads o's AnnotationDroppedFields.
func droppedFields(o *unstructured.Unstructured) []string {
	v, ok := o.GetAnnotations()[AnnotationDroppedFields]
	if !ok {
		return nil
	}
	var fields []string
	if err := json.Unmarshal([]byte(v), &fields); err != nil {
		return nil
	}
	return fields
}

// carryDrops returns objs with the fields that the applied version of each
// (in applied) left out taken out again and recorded the same way: what
// the release would hold if it applied objs now and the schemas had not
// changed. Objects without dropped fields are returned as they are, and so
// is an object that no longer has all of them (its record would be stale).
func carryDrops(objs, applied []*unstructured.Unstructured) []*unstructured.Unstructured {
	return carryRecorded(objs, recordedDrops(applied))
}

// recordedDrops maps the key of each object in applied that was applied
// without some fields to its record of them (AnnotationDroppedFields).
func recordedDrops(applied []*unstructured.Unstructured) map[string]string {
	drops := map[string]string{}
	for _, o := range applied {
		if droppedFields(o) != nil {
			drops[key(o)] = o.GetAnnotations()[AnnotationDroppedFields]
		}
	}
	return drops
}

// carryRecorded is carryDrops from the records recordedDrops returned.
func carryRecorded(objs []*unstructured.Unstructured, drops map[string]string) []*unstructured.Unstructured {
	if len(drops) == 0 {
		return objs
	}
	carried := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		carried[i] = o
		record, ok := drops[key(o)]
		if !ok {
			continue
		}
		var fields []string
		if err := json.Unmarshal([]byte(record), &fields); err != nil {
			continue
		}
		o = o.DeepCopy()
		if !dropAll(o.Object, fields) {
			continue
		}
		ann := o.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[AnnotationDroppedFields] = record
		o.SetAnnotations(ann)
		carried[i] = o
	}
	return carried
}

// dropAll drops every one of fields from obj and says whether all were
// there.
func dropAll(obj map[string]any, fields []string) bool {
	for _, f := range fields {
		if !dropField(obj, f) {
			return false
		}
	}
	return true
}
