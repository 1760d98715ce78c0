package jsonmap

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"

	yamlv2 "go.yaml.in/yaml/v2"
	"sigs.k8s.io/yaml"
)

// FromYAML decodes one YAML document, an object or empty (nil), as
// Unmarshal(sigs.k8s.io/yaml.YAMLToJSON(text)) does: what Kubernetes and
// Helm make of a manifest. It converts the YAML parser's values directly,
// where YAMLToJSON converts them, writes them as JSON, and the JSON is
// decoded again (a third of what decoding a bundle's YAML allocated). Any
// document it does not convert completely (an error, a value or key of a
// kind manifests do not hold) is decoded the long way, so errors and their
// messages are the same as the long way's (YAMLToJSON's prefixed with
// "error converting YAML to JSON: ", as sigs.k8s.io/yaml.Unmarshal gives
// them); one the YAML parser refuses is not parsed again.
func FromYAML(text []byte) (map[string]any, error) {
	if m, ok := fromBlock(text); ok {
		return m, nil
	}
	var doc any
	if err := yamlv2.Unmarshal(text, &doc); err != nil {
		return nil, &yamlError{err} // the long way parses the same, and fails the same
	}
	switch m := doc.(type) {
	case nil:
		return nil, nil
	case map[any]any:
		if out, ok := fromYAMLMap(m, 0); ok {
			return out, nil
		}
	}
	raw, err := yaml.YAMLToJSON(text)
	if err != nil {
		return nil, &yamlError{err}
	}
	return Unmarshal(raw)
}

// yamlError is sigs.k8s.io/yaml.Unmarshal's wording of a conversion error.
type yamlError struct{ err error }

func (e *yamlError) Error() string { return "error converting YAML to JSON: " + e.err.Error() }
func (e *yamlError) Unwrap() error { return e.err }

// fromYAMLValue is v as the JSON round trip leaves it, and whether it was
// converted here.
func fromYAMLValue(v any, depth int) (any, bool) {
	switch v := v.(type) {
	case nil, bool:
		return v, true
	case string:
		return validUTF8(v), true
	case int:
		return int64(v), true
	case int64:
		return v, true
	case uint64:
		// Beyond int64 (smaller ones come as int): JSON's integer text
		// decodes as a float64.
		return float64(v), true
	case float64:
		var b [32]byte
		text, err := appendFloat(b[:0], v)
		if err != nil {
			return nil, false // not finite: JSON's error
		}
		// A whole number is written without a fraction and decodes as
		// an int64 when it fits.
		if bytes.IndexByte(text, '.') < 0 {
			if n, err := strconv.ParseInt(string(text), 10, 64); err == nil {
				return n, true
			}
		}
		return v, true
	case map[any]any:
		return fromYAMLMap(v, depth+1)
	case []any:
		if depth >= maxDepth {
			return nil, false
		}
		out := make([]any, len(v))
		for i, el := range v {
			c, ok := fromYAMLValue(el, depth+1)
			if !ok {
				return nil, false
			}
			out[i] = c
		}
		return out, true
	}
	return nil, false
}

func fromYAMLMap(m map[any]any, depth int) (map[string]any, bool) {
	if depth >= maxDepth {
		return nil, false
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		var key string
		switch k := k.(type) {
		case string:
			key = validUTF8(k)
		case int:
			key = strconv.Itoa(k)
		case int64:
			key = strconv.FormatInt(k, 10)
		case bool:
			key = strconv.FormatBool(k)
		default:
			// Floats (formatted as float32s) and what is not a key in
			// JSON: the long way.
			return nil, false
		}
		if _, dup := out[key]; dup {
			// 1 and "1" are one key in JSON; which value the long way
			// keeps depends on map order.
			return nil, false
		}
		c, ok := fromYAMLValue(v, depth)
		if !ok {
			return nil, false
		}
		out[key] = c
	}
	return out, true
}

// validUTF8 is s after a JSON round trip: each byte that is not UTF-8
// becomes U+FFFD.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
