package crdupgrade

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/rukpak-dev/rukpak/internal/sortedkeys"
)

// Change is one difference between the old and the new schema of a
// version, at a field path ("spec.ports[*].name"; [*] is any list item or
// map value).
type Change struct {
	Check  Check
	Path   Path
	Detail string
	// oldDefault is the default a DefaultChanged change replaces or
	// removes (compact JSON; "" when a default is added).
	oldDefault string
}

// Path is a field path as segments; "*" stands for any list index or map key.
type Path []string

func (p Path) String() string {
	var b strings.Builder
	for i, s := range p {
		switch {
		case s == "*":
			b.WriteString("[*]")
		case strings.HasPrefix(s, "["):
			b.WriteString(s)
		case i > 0:
			b.WriteString(".")
			b.WriteString(s)
		default:
			b.WriteString(s)
		}
	}
	if b.Len() == 0 {
		return "<root>"
	}
	return b.String()
}

func (p Path) child(s string) Path { return append(slices.Clip(p), s) }

// covers reports whether p is a prefix of (or equal to) q, "*" in p
// matching any segment of q.
func (p Path) covers(q Path) bool {
	if len(p) > len(q) {
		return false
	}
	for i, s := range p {
		if s != "*" && s != q[i] {
			return false
		}
	}
	return true
}

// parseFieldPath turns a field error path ("spec.ports[0].name",
// "spec.labels[app.kubernetes.io/name]") into segments, indexes and keys in
// brackets becoming "*".
func parseFieldPath(s string) Path {
	var p Path
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			p = append(p, cur.String())
			cur.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '.':
			flush()
		case '[':
			flush()
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return p
			}
			p = append(p, "*")
			i += end
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	return p
}

// maxSchemaDepth bounds the recursion over a schema from a bundle; the API
// server's own limits keep real schemas far below it.
const maxSchemaDepth = 64

// diffSchemas lists what changed from old to new. Changes to descriptions
// and other documentation are ignored; additions of optional fields are
// not changes (they break nothing stored).
func diffSchemas(old, new *apiextensionsv1.JSONSchemaProps) []Change {
	var out []Change
	diffNode(&out, nil, old, new, 0)
	return out
}

func diffNode(out *[]Change, p Path, old, new *apiextensionsv1.JSONSchemaProps, depth int) {
	if old == nil || new == nil {
		if (old == nil) != (new == nil) {
			*out = append(*out, Change{Check: CheckUnknown, Path: p, Detail: "schema added or removed"})
		}
		return
	}
	if depth > maxSchemaDepth {
		*out = append(*out, Change{Check: CheckUnknown, Path: p, Detail: fmt.Sprintf("schema nested deeper than %d levels is not compared", maxSchemaDepth)})
		return
	}
	if old.Type != new.Type {
		*out = append(*out, Change{Check: CheckTypeChanged, Path: p, Detail: fmt.Sprintf("type changed from %s to %s", typeName(old.Type), typeName(new.Type))})
	}
	diffEnum(out, p, old.Enum, new.Enum)
	diffDefault(out, p, old.Default, new.Default)
	diffBounds(out, p, old, new)
	if keys := otherDifferences(old, new); len(keys) > 0 {
		*out = append(*out, Change{Check: CheckUnknown, Path: p, Detail: strings.Join(keys, ", ") + " changed"})
	}

	for _, r := range new.Required {
		if !slices.Contains(old.Required, r) {
			*out = append(*out, Change{Check: CheckRequiredFieldAdded, Path: p.child(r), Detail: "required field added"})
		}
	}
	for _, name := range sortedKeys(old.Properties) {
		o := old.Properties[name]
		n, ok := new.Properties[name]
		switch {
		case ok:
			diffNode(out, p.child(name), &o, &n, depth+1)
		case new.AdditionalProperties != nil && new.AdditionalProperties.Schema != nil:
			*out = append(*out, Change{Check: CheckUnknown, Path: p.child(name), Detail: "field now validated by additionalProperties"})
		case new.XPreserveUnknownFields != nil && *new.XPreserveUnknownFields:
			// Kept as an unknown field: nothing is pruned.
		default:
			*out = append(*out, Change{Check: CheckFieldRemoved, Path: p.child(name), Detail: "field removed"})
		}
	}
	diffNode(out, p.child("*"), itemSchema(old), itemSchema(new), depth+1)
	oldAP, newAP := additionalSchema(old), additionalSchema(new)
	if oldAP != nil && newAP == nil && (new.XPreserveUnknownFields == nil || !*new.XPreserveUnknownFields) {
		*out = append(*out, Change{Check: CheckFieldRemoved, Path: p.child("*"), Detail: "map values (additionalProperties) removed"})
	} else if oldAP != nil {
		diffNode(out, p.child("*"), oldAP, newAP, depth+1)
	}
}

func typeName(t string) string {
	if t == "" {
		return "none"
	}
	return t
}

func itemSchema(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if s.Items == nil {
		return nil
	}
	return s.Items.Schema
}

func additionalSchema(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if s.AdditionalProperties == nil {
		return nil
	}
	return s.AdditionalProperties.Schema
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// jsonText is a JSON value in compact form, for comparing and showing.
func jsonText(v *apiextensionsv1.JSON) string {
	if v == nil {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v.Raw); err != nil {
		return string(v.Raw)
	}
	return b.String()
}

func diffEnum(out *[]Change, p Path, old, new []apiextensionsv1.JSON) {
	if len(new) == 0 {
		return
	}
	if len(old) == 0 {
		*out = append(*out, Change{Check: CheckEnumNarrowed, Path: p, Detail: "enum added: " + joinJSON(new)})
		return
	}
	var removed []apiextensionsv1.JSON
	for _, o := range old {
		if !slices.ContainsFunc(new, func(n apiextensionsv1.JSON) bool { return jsonText(&n) == jsonText(&o) }) {
			removed = append(removed, o)
		}
	}
	if len(removed) > 0 {
		*out = append(*out, Change{Check: CheckEnumNarrowed, Path: p, Detail: "enum values removed: " + joinJSON(removed)})
	}
}

func joinJSON(vs []apiextensionsv1.JSON) string {
	s := make([]string, len(vs))
	for i := range vs {
		s[i] = jsonText(&vs[i])
	}
	return strings.Join(s, ", ")
}

// canonical is v as encoding/json writes it (object keys sorted), to
// compare with values of decoded objects.
func canonical(v *apiextensionsv1.JSON) string {
	var x any
	if err := json.Unmarshal(v.Raw, &x); err != nil {
		return jsonText(v)
	}
	b, err := json.Marshal(x)
	if err != nil {
		return jsonText(v)
	}
	return string(b)
}

func diffDefault(out *[]Change, p Path, old, new *apiextensionsv1.JSON) {
	o, n := jsonText(old), jsonText(new)
	switch {
	case o == n:
	case o == "":
		*out = append(*out, Change{Check: CheckDefaultChanged, Path: p, Detail: "default added: " + n})
	case n == "":
		*out = append(*out, Change{Check: CheckDefaultChanged, Path: p, Detail: "default removed (was " + o + ")", oldDefault: canonical(old)})
	default:
		*out = append(*out, Change{Check: CheckDefaultChanged, Path: p, Detail: "default changed from " + o + " to " + n, oldDefault: canonical(old)})
	}
}

func diffBounds(out *[]Change, p Path, old, new *apiextensionsv1.JSONSchemaProps) {
	bound := func(name, o, n string) {
		switch {
		case o == n:
		case o == "":
			*out = append(*out, Change{Check: CheckBoundsChanged, Path: p, Detail: name + " added: " + n})
		case n == "":
			*out = append(*out, Change{Check: CheckBoundsChanged, Path: p, Detail: name + " removed (was " + o + ")"})
		default:
			*out = append(*out, Change{Check: CheckBoundsChanged, Path: p, Detail: name + " changed from " + o + " to " + n})
		}
	}
	f := func(v *float64) string {
		if v == nil {
			return ""
		}
		return strconv.FormatFloat(*v, 'g', -1, 64)
	}
	i := func(v *int64) string {
		if v == nil {
			return ""
		}
		return strconv.FormatInt(*v, 10)
	}
	b := func(v bool) string {
		if !v {
			return ""
		}
		return "true"
	}
	bound("minimum", f(old.Minimum), f(new.Minimum))
	bound("maximum", f(old.Maximum), f(new.Maximum))
	bound("exclusiveMinimum", b(old.ExclusiveMinimum), b(new.ExclusiveMinimum))
	bound("exclusiveMaximum", b(old.ExclusiveMaximum), b(new.ExclusiveMaximum))
	bound("minLength", i(old.MinLength), i(new.MinLength))
	bound("maxLength", i(old.MaxLength), i(new.MaxLength))
	bound("minItems", i(old.MinItems), i(new.MinItems))
	bound("maxItems", i(old.MaxItems), i(new.MaxItems))
	bound("minProperties", i(old.MinProperties), i(new.MinProperties))
	bound("maxProperties", i(old.MaxProperties), i(new.MaxProperties))
}

// otherDifferences names the schema keywords of one node, beyond those the
// named checks compare and documentation, whose values differ: patterns,
// formats, CEL rules, list types, nullable and the like.
func otherDifferences(old, new *apiextensionsv1.JSONSchemaProps) []string {
	o, n := keywords(old), keywords(new)
	var keys []string
	for _, k := range sortedkeys.Union(o, n) {
		v, inOld := o[k]
		w, inNew := n[k]
		if inOld != inNew || !bytes.Equal(v, w) {
			keys = append(keys, k)
		}
	}
	return keys
}

func keywords(s *apiextensionsv1.JSONSchemaProps) map[string]json.RawMessage {
	c := *s
	c.Description, c.Title, c.Example, c.ExternalDocs = "", "", nil, nil
	c.Type, c.Enum, c.Default, c.Required = "", nil, nil, nil
	c.Properties, c.Items, c.AdditionalProperties = nil, nil, nil
	c.Minimum, c.Maximum, c.ExclusiveMinimum, c.ExclusiveMaximum = nil, nil, false, false
	c.MinLength, c.MaxLength, c.MinItems, c.MaxItems, c.MinProperties, c.MaxProperties = nil, nil, nil, nil, nil, nil
	m := map[string]json.RawMessage{}
	raw, err := json.Marshal(&c)
	if err == nil {
		err = json.Unmarshal(raw, &m)
	}
	if err != nil {
		// Never expected of a decoded schema; make it a difference.
		return map[string]json.RawMessage{"schema": json.RawMessage(strconv.Quote(err.Error()))}
	}
	return m
}
