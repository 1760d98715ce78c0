package jsonmap

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/rukpak-dev/rukpak/internal/sortedkeys"
)

// Marshal is json.Marshal(v) for v holding what an unstructured object
// does (maps, slices, strings, numbers, booleans, nil), byte for byte:
// the same key order, escapes and number forms. It measures the JSON
// first, so the result is the one allocation of it, and sorts each map's
// keys in a reused slice, where encoding/json reflects over every map and
// allocates its sorted keys and a growing buffer. Values of other types
// are written by encoding/json, and any error is encoding/json's.
func Marshal(v any) ([]byte, error) {
	return appendJSON(nil, v, true)
}

// Encode is what a json.Encoder with SetEscapeHTML(false) writes of v:
// "<", ">" and "&" as they are, and a newline.
func Encode(v any) ([]byte, error) {
	n, err := measure(v, false)
	if err != nil {
		b, err := standard(nil, v, false)
		if err != nil {
			return nil, err
		}
		return append(b, '\n'), nil
	}
	b := make([]byte, 0, n+1)
	if b, err = encodeMeasured(b, v, false); err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Size is the length of Encode's JSON of v, without its newline (0 if
// Encode would fail).
func Size(v any) int {
	n, err := measure(v, false)
	if err != nil {
		b, _ := standard(nil, v, false)
		return len(b)
	}
	return n
}

// Append appends Encode's JSON of v, without its newline, to dst: a
// caller that sized dst (Size) allocates nothing more.
func Append(dst []byte, v any) ([]byte, error) {
	return appendJSON(dst, v, false)
}

func appendJSON(dst []byte, v any, escapeHTML bool) ([]byte, error) {
	n, err := measure(v, escapeHTML)
	if err != nil {
		return standard(dst, v, escapeHTML)
	}
	return encodeMeasured(slices.Grow(dst, n), v, escapeHTML)
}

// encodeMeasured appends v, measured, to b.
func encodeMeasured(b []byte, v any, escapeHTML bool) ([]byte, error) {
	e := getEncoder()
	defer e.release()
	out, err := e.value(b, v, escapeHTML)
	if err != nil {
		return standard(b, v, escapeHTML)
	}
	return out, nil
}

// standard is encoding/json's answer.
func standard(dst []byte, v any, escapeHTML bool) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return append(dst, bytes.TrimSuffix(b.Bytes(), []byte("\n"))...), nil
}

// errOther: a value this encoder leaves to encoding/json.
var errOther = errors.New("not a value of a decoded object")

// encoder holds the sorted keys of the maps being written, reused.
type encoder struct {
	keys sortedkeys.Stack
	// nesting is that of the map or slice being written.
	nesting int
	// scratch is Write's buffer.
	scratch []byte
}

var encoders = make(chan *encoder, 8)

// maxScratchKeep bounds the buffer an idle encoder keeps: most objects,
// not the largest CRDs.
const maxScratchKeep = 1 << 20

func getEncoder() *encoder {
	select {
	case e := <-encoders:
		return e
	default:
		return &encoder{}
	}
}

// release keeps e for the next encode unless it holds many keys or a
// large buffer.
func (e *encoder) release() {
	if cap(e.scratch) > maxScratchKeep || e.keys.Largest() > maxStackKeep {
		return
	}
	e.keys.Reset()
	e.nesting = 0
	select {
	case encoders <- e:
	default:
	}
}

func (e *encoder) value(b []byte, v any, escapeHTML bool) ([]byte, error) {
	if e.nesting > maxEncodeDepth {
		return nil, errOther
	}
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case map[string]any:
		if v == nil {
			return append(b, "null"...), nil
		}
		keys := e.keys.Enter(v)
		e.nesting++
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k, escapeHTML)
			b = append(b, ':')
			var err error
			if b, err = e.value(b, v[k], escapeHTML); err != nil {
				return nil, err
			}
		}
		e.keys.Leave()
		e.nesting--
		return append(b, '}'), nil
	case []any:
		if v == nil {
			return append(b, "null"...), nil
		}
		e.nesting++
		b = append(b, '[')
		for i, el := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = e.value(b, el, escapeHTML); err != nil {
				return nil, err
			}
		}
		e.nesting--
		return append(b, ']'), nil
	case string:
		return appendString(b, v, escapeHTML), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case float64:
		return appendFloat(b, v)
	}
	return nil, errOther
}

// maxEncodeDepth is the deepest nesting written here; deeper values (a
// cycle a caller built by hand, say) are left to encoding/json, which
// refuses cycles.
const maxEncodeDepth = 1000

// measure is the length of v's JSON.
func measure(v any, escapeHTML bool) (int, error) { return measureAt(v, escapeHTML, 0) }

func measureAt(v any, escapeHTML bool, depth int) (int, error) {
	if depth > maxEncodeDepth {
		return 0, errOther
	}
	switch v := v.(type) {
	case nil:
		return len("null"), nil
	case map[string]any:
		if v == nil {
			return len("null"), nil
		}
		n := 2 + max(len(v)-1, 0) // braces, commas
		for k, el := range v {
			vn, err := measureAt(el, escapeHTML, depth+1)
			if err != nil {
				return 0, err
			}
			n += stringSize(k, escapeHTML) + 1 + vn
		}
		return n, nil
	case []any:
		if v == nil {
			return len("null"), nil
		}
		n := 2 + max(len(v)-1, 0)
		for _, el := range v {
			vn, err := measureAt(el, escapeHTML, depth+1)
			if err != nil {
				return 0, err
			}
			n += vn
		}
		return n, nil
	case string:
		return stringSize(v, escapeHTML), nil
	case bool:
		if v {
			return len("true"), nil
		}
		return len("false"), nil
	case int64:
		var b [20]byte
		return len(strconv.AppendInt(b[:0], v, 10)), nil
	case int:
		var b [20]byte
		return len(strconv.AppendInt(b[:0], int64(v), 10)), nil
	case float64:
		var b [32]byte
		text, err := appendFloat(b[:0], v)
		return len(text), err
	}
	return 0, errOther
}

// appendFloat writes f as encoding/json does: like ES6, 'f' form between
// 1e-6 and 1e21, else 'e' with the exponent unpadded.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, errOther // encoding/json's error
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

const hexDigits = "0123456789abcdef"

// plainBytes and plainHTMLBytes are the ASCII bytes a string holds as
// they are, without and with HTML escapes.
var plainBytes, plainHTMLBytes = func() (p, h [utf8.RuneSelf]bool) {
	for c := byte(0x20); c < utf8.RuneSelf; c++ {
		p[c] = c != '"' && c != '\\'
		h[c] = p[c] && c != '<' && c != '>' && c != '&'
	}
	return p, h
}()

func plain(c byte, escapeHTML bool) bool {
	if escapeHTML {
		return plainHTMLBytes[c]
	}
	return plainBytes[c]
}

// appendString quotes s as encoding/json does: short escapes for \b, \f,
// \n, \r, \t, quotes and backslashes; \u00XX for other control bytes (and
// <, >, & when escapeHTML); \ufffd for each byte that is not UTF-8; and
// U+2028, U+2029 escaped.
func appendString(b []byte, s string, escapeHTML bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if plain(c, escapeHTML) {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// stringSize is the length of appendString's quoting of s.
func stringSize(s string, escapeHTML bool) int {
	table := &plainBytes
	if escapeHTML {
		table = &plainHTMLBytes
	}
	n := 2
	for i := 0; i < len(s); {
		// Most strings are plain ASCII.
		for i < len(s) && s[i] < utf8.RuneSelf && table[s[i]] {
			i++
			n++
		}
		if i == len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
			switch {
			case plain(c, escapeHTML):
				n++
			case c == '\\', c == '"', c == '\b', c == '\f', c == '\n', c == '\r', c == '\t':
				n += 2
			default:
				n += 6
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}
