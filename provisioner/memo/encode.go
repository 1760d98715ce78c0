package memo

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// errNotJSON: a value JSON cannot hold exactly; objects holding one are
// not kept.
var errNotJSON = errors.New("not representable as JSON")

// encoder writes decoded objects as compact JSON with sorted keys, as
// encoding/json would, without its reflection and per-map key slices:
// the bytes an entry keeps are most of what adding it allocates.
type encoder struct {
	buf []byte
	// keys holds each depth's sorted map keys, reused from map to map.
	keys  [][]string
	depth int
}

var encoders = sync.Pool{New: func() any { return &encoder{} }}

// encode returns objs as an entry, or an error if their JSON is over
// maxBytes or they hold a value JSON cannot hold exactly (a NaN, an
// infinity, a string that is not UTF-8, a type decoding never produces).
func encode(objs []*unstructured.Unstructured, maxBytes int64) (*entry, error) {
	enc := encoders.Get().(*encoder)
	defer func() {
		if cap(enc.buf) <= 4<<20 { // a huge buffer is not kept for the next
			enc.buf = enc.buf[:0]
			encoders.Put(enc)
		}
	}()
	enc.buf = enc.buf[:0]
	e := &entry{ends: make([]int, 0, len(objs))}
	for _, o := range objs {
		if o == nil {
			enc.buf = append(enc.buf, "null"...)
		} else if err := enc.value(o.Object); err != nil {
			return nil, err
		}
		if int64(len(enc.buf)) > maxBytes {
			return nil, fmt.Errorf("objects over %d bytes of JSON", maxBytes)
		}
		e.ends = append(e.ends, len(enc.buf))
	}
	e.data = slices.Clone(enc.buf)
	return e, nil
}

func (e *encoder) value(v any) error {
	switch v := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case map[string]any:
		return e.object(v)
	case []any:
		e.buf = append(e.buf, '[')
		for i, el := range v {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if err := e.value(el); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, ']')
	case string:
		return e.string(v)
	case bool:
		e.buf = strconv.AppendBool(e.buf, v)
	case int64:
		e.buf = strconv.AppendInt(e.buf, v, 10)
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return errNotJSON
		}
		// The shortest form that reads back as the same float64; a whole
		// one in int64's range reads back as an int64, which Digest counts
		// as the same value.
		e.buf = strconv.AppendFloat(e.buf, v, 'g', -1, 64)
	default:
		return fmt.Errorf("%w: a %T", errNotJSON, v)
	}
	return nil
}

func (e *encoder) object(m map[string]any) error {
	if e.depth == len(e.keys) {
		e.keys = append(e.keys, nil)
	}
	keys := e.keys[e.depth][:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.keys[e.depth] = keys
	e.depth++
	defer func() { e.depth-- }()
	e.buf = append(e.buf, '{')
	for i, k := range keys {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.string(k); err != nil {
			return err
		}
		e.buf = append(e.buf, ':')
		if err := e.value(m[k]); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	// Drop the references: the pooled slices must not keep keys alive.
	clear(keys)
	return nil
}

const hex = "0123456789abcdef"

// string writes s quoted: quotes, backslashes and control characters
// escaped, everything else as it is.
func (e *encoder) string(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: a string that is not UTF-8", errNotJSON)
	}
	e.buf = append(e.buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		e.buf = append(e.buf, s[start:i]...)
		switch c {
		case '"', '\\':
			e.buf = append(e.buf, '\\', c)
		case '\n':
			e.buf = append(e.buf, '\\', 'n')
		case '\r':
			e.buf = append(e.buf, '\\', 'r')
		case '\t':
			e.buf = append(e.buf, '\\', 't')
		default:
			e.buf = append(e.buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	e.buf = append(e.buf, s[start:]...)
	e.buf = append(e.buf, '"')
	return nil
}
