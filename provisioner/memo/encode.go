package memo

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rukpak-dev/rukpak/internal/sortedkeys"
)

// errNotJSON: a value JSON cannot hold exactly; objects holding one are
// not kept.
var errNotJSON = errors.New("not representable as JSON")

// errTooLarge: objects over the entry bound, given up as soon as the JSON
// written passes it.
var errTooLarge = errors.New("objects over the bound of one entry")

// Pooled digesters with more than this kept (buffer, a depth's keys) and
// encoders with more keys are dropped rather than pooled: the pools are
// outside the cache's bound.
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
	keys sortedkeys.Stack
}

var encoders = sync.Pool{New: func() any { return &encoder{} }}

// encode returns objs as an entry, or an error if their JSON is over
// maxBytes or they hold a value JSON cannot hold exactly (a NaN, an
// infinity, a string that is not UTF-8, a type decoding never produces).
func encode(objs []*unstructured.Unstructured, maxBytes int64) (*entry, error) {
	// Measured first, so the entry's bytes are allocated once at their
	// size: a buffer grown while writing (sync.Pool keeps none across the
	// many collections of an install) and then copied allocated three
	// times the entry.
	size := 0
	for _, o := range objs {
		n := len("null")
		if o != nil {
			var err error
			if n, err = measure(o.Object); err != nil {
				return nil, err
			}
		}
		if size += n; size > int(min(maxBytes, math.MaxInt)) {
			return nil, errTooLarge
		}
	}
	enc := encoders.Get().(*encoder)
	defer enc.release()
	enc.buf = make([]byte, 0, size)
	enc.max = size
	e := &entry{objects: make([][]byte, 0, len(objs))}
	for _, o := range objs {
		start := len(enc.buf)
		if o == nil {
			enc.buf = append(enc.buf, "null"...)
		} else if err := enc.value(o.Object); err != nil {
			return nil, err
		}
		e.objects = append(e.objects, enc.buf[start:])
	}
	return e, nil
}

// release pools e unless it holds more than a small encoder should.
func (e *encoder) release() {
	e.buf = nil // the entry's
	if e.keys.Largest() > maxPooledKeys {
		return
	}
	e.keys.Reset()
	encoders.Put(e)
}

// measure is the length of v's JSON as encoder writes it (a nil object's
// is "null"), or the error encoder would give.
func measure(v any) (int, error) {
	switch v := v.(type) {
	case nil:
		return len("null"), nil
	case map[string]any:
		if v == nil {
			return len("null"), nil
		}
		n := 2 + max(len(v)-1, 0) // braces, commas
		for k, el := range v {
			kn, err := measureString(k)
			if err != nil {
				return 0, err
			}
			vn, err := measure(el)
			if err != nil {
				return 0, err
			}
			n += kn + 1 + vn
		}
		return n, nil
	case []any:
		if v == nil {
			return len("null"), nil
		}
		n := 2 + max(len(v)-1, 0)
		for _, el := range v {
			vn, err := measure(el)
			if err != nil {
				return 0, err
			}
			n += vn
		}
		return n, nil
	case string:
		return measureString(v)
	case bool:
		if v {
			return len("true"), nil
		}
		return len("false"), nil
	case int64:
		var b [20]byte
		return len(strconv.AppendInt(b[:0], v, 10)), nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, errNotJSON
		}
		var b [32]byte
		text := strconv.AppendFloat(b[:0], v, 'g', -1, 64)
		if !bytes.ContainsAny(text, ".eE") {
			return len(text) + len(".0"), nil
		}
		return len(text), nil
	default:
		return 0, fmt.Errorf("%w: a %T", errNotJSON, v)
	}
}

// measureString is the length of s as string writes it.
func measureString(s string) (int, error) {
	if !utf8.ValidString(s) {
		return 0, fmt.Errorf("%w: a string that is not UTF-8", errNotJSON)
	}
	n := len(s) + 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"', c == '\\', c == '\n', c == '\r', c == '\t':
			n++
		case c < 0x20:
			n += len(`\u0000`) - 1
		}
	}
	return n, nil
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
	keys := e.keys.Enter(m)
	defer e.keys.Leave() // the pooled slices must not keep keys alive
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
