package memo

import (
	"bytes"
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

// errTooLarge: objects over the entry bound, given up as soon as the JSON
// written passes it.
var errTooLarge = errors.New("objects over the bound of one entry")

// Pooled encoders with more than this kept (buffer, a depth's keys) are
// dropped rather than pooled: the pool is outside the cache's bound.
const (
	maxPooledBuffer = 1 << 20
	maxPooledKeys   = 1 << 12
)

// encoder writes decoded objects as compact JSON with sorted keys, as
// encoding/json would, without its reflection and per-map key slices:
// the bytes an entry keeps are most of what adding it allocates.
type encoder struct {
	buf  []byte
	max  int // bytes of JSON it gives up beyond
	keys sortedKeys
}

var encoders = sync.Pool{New: func() any { return &encoder{} }}

// encode returns objs as an entry, or an error if their JSON is over
// maxBytes or they hold a value JSON cannot hold exactly (a NaN, an
// infinity, a string that is not UTF-8, a type decoding never produces).
func encode(objs []*unstructured.Unstructured, maxBytes int64) (*entry, error) {
	enc := encoders.Get().(*encoder)
	defer enc.release()
	enc.buf = enc.buf[:0]
	enc.max = int(min(maxBytes, math.MaxInt))
	e := &entry{ends: make([]int, 0, len(objs))}
	for _, o := range objs {
		if o == nil {
			enc.buf = append(enc.buf, "null"...)
		} else if err := enc.value(o.Object); err != nil {
			return nil, err
		}
		if len(enc.buf) > enc.max {
			return nil, errTooLarge
		}
		e.ends = append(e.ends, len(enc.buf))
	}
	e.data = slices.Clone(enc.buf)
	return e, nil
}

// release pools e unless it holds more than a small encoder should.
func (e *encoder) release() {
	if cap(e.buf) > maxPooledBuffer {
		return
	}
	if e.keys.largest() > maxPooledKeys {
		return
	}
	e.buf, e.keys.depth = e.buf[:0], 0
	encoders.Put(e)
}

func (e *encoder) value(v any) error {
	switch v := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case map[string]any:
		if v == nil {
			e.buf = append(e.buf, "null"...) // as encoding/json writes it
			return nil
		}
		return e.object(v)
	case []any:
		if v == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		e.buf = append(e.buf, '[')
		for i, el := range v {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if err := e.value(el); err != nil {
				return err
			}
			if len(e.buf) > e.max {
				return errTooLarge
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
		// The shortest form that reads back as the same float64, and as a
		// float64: apimachinery's JSON reads a number without a fraction
		// or an exponent as an int64, so a whole one gets ".0" (2.0, not
		// 2; -0.0, not -0).
		start := len(e.buf)
		e.buf = strconv.AppendFloat(e.buf, v, 'g', -1, 64)
		if !bytes.ContainsAny(e.buf[start:], ".eE") {
			e.buf = append(e.buf, ".0"...)
		}
	default:
		return fmt.Errorf("%w: a %T", errNotJSON, v)
	}
	return nil
}

func (e *encoder) object(m map[string]any) error {
	keys := e.keys.enter(m)
	defer e.keys.leave() // the pooled slices must not keep keys alive
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
		if len(e.buf) > e.max {
			return errTooLarge
		}
	}
	e.buf = append(e.buf, '}')
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
