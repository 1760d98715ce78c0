// Package jsonmap decodes a JSON object into the generic values an
// unstructured Kubernetes object holds (map[string]any, []any, string,
// int64, float64, bool and nil), giving exactly what apimachinery's
// util/json.Unmarshal gives, for a fraction of its allocations.
//
// The provisioner decodes every object it installs several times (a
// bundle's stored objects, each reconcile's copy out of the decoded-object
// cache, the live objects read back for drift and health): a fifth of all
// it allocated installing sixty real operators. The standard decoder
// allocates every key and every string anew, grows each map and slice from
// empty, and goes through reflection for the outer map. This one keeps the
// members of the object being decoded on a reused stack and makes each map
// and slice once at its size, and reuses the strings that repeat across
// objects (keys such as "name" and "type", values such as "string" in a
// CRD's schema) from a bounded table.
//
// Only input it decodes completely is answered here; anything else (a
// syntax error, a number out of range, nesting deeper than maxDepth) is
// decoded again by util/json, so errors and their messages, and whatever
// the standard decoder accepts that this one does not, are exactly
// util/json's.
//
// Marshal, Encode and Write are encoding/json's output for the same
// values, byte for byte, allocating the JSON once: it is measured first,
// and each map's keys are sorted in a reused slice.
package jsonmap

import (
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Unmarshal decodes data, a JSON object or null (nil), as
// util/json.Unmarshal into a map[string]any does.
func Unmarshal(data []byte) (map[string]any, error) {
	if m, ok := decode(data, whole); ok {
		return m, nil
	}
	return reference(data, whole)
}

// UnmarshalLive is Unmarshal for an object read from the API server,
// without its metadata.managedFields: they record who set each field, which
// no comparison with a wanted state or health check reads, and for a CRD
// they are as large as its schema.
func UnmarshalLive(data []byte) (map[string]any, error) {
	if m, ok := decode(data, live); ok {
		return m, nil
	}
	return reference(data, live)
}

// UnmarshalLiveStatus is UnmarshalLive keeping only the object's
// apiVersion, kind, metadata and status: the rest (a CRD's spec, its
// schemas, is most of its bytes) is checked as JSON but not decoded. For
// an object whose health is read from its status alone, and whose other
// fields are known not to have changed.
func UnmarshalLiveStatus(data []byte) (map[string]any, error) {
	if m, ok := decode(data, liveStatus); ok {
		return m, nil
	}
	return reference(data, liveStatus)
}

// A mode says what of an object is decoded.
type mode uint8

const (
	whole mode = iota
	// live drops metadata.managedFields.
	live
	// liveStatus is live with only the top-level keys statusKey keeps.
	liveStatus
)

// statusKey reports whether liveStatus keeps the top-level key k.
func statusKey(k string) bool {
	return k == "apiVersion" || k == "kind" || k == "metadata" || k == "status"
}

func reference(data []byte, m mode) (map[string]any, error) {
	var obj map[string]any
	if err := utiljson.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	if md, ok := obj["metadata"].(map[string]any); ok && m != whole {
		delete(md, "managedFields")
	}
	if m == liveStatus {
		for k := range obj {
			if !statusKey(k) {
				delete(obj, k)
			}
		}
	}
	return obj, nil
}

// maxDepth is the deepest nesting decoded here; deeper input goes to
// util/json (which allows 10,000 levels), so this decoder's recursion is
// bounded whatever the input.
const maxDepth = 200

// Bounds of the tables of repeated strings: a full table is emptied, so
// input of unique strings never keeps more.
const (
	maxKeys     = 4096
	maxKeyLen   = 64
	maxValues   = 4096
	maxValueLen = 32
)

// maxStackKeep bounds the stacks and scratch an idle decoder keeps: one
// huge input's are left to the collector.
const maxStackKeep = 1 << 14

type member struct {
	key   string
	value any
}

type decoder struct {
	data []byte
	pos  int
	// depth is the nesting of the value being decoded.
	depth int
	// mode is what of the object is decoded.
	mode mode

	// members and elements are the stacks of the objects and arrays being
	// decoded: each map or slice is made once, at its size.
	members  []member
	elements []any
	scratch  []byte

	keys   map[string]string
	values map[string]any

	// shared is how many SharedKey values hold the one being decoded;
	// shares are the maps and slices decoded under one, by hash.
	shared int
	shares map[uint64]any
	strs   map[string]any
}

// decoders are the idle decoders, kept across garbage collections (which
// empty a sync.Pool, and the provisioner collects often while it
// installs): a decoder's tables are worth most once filled.
var decoders = make(chan *decoder, 8)

func getDecoder() *decoder {
	select {
	case d := <-decoders:
		return d
	default:
		return &decoder{keys: make(map[string]string, 256), values: make(map[string]any, 256)}
	}
}

func decode(data []byte, m mode) (map[string]any, bool) {
	d := getDecoder()
	d.data, d.pos, d.depth, d.mode = data, 0, 0, m
	obj, ok := d.top()
	d.release()
	return obj, ok
}

// release lets go of the input and of every decoded value (a failed decode
// leaves some on the stacks) and keeps d for the next decode.
func (d *decoder) release() {
	d.data = nil
	// Nothing is shared with another document; a table one large document
	// filled is left to the collector, as its stacks are.
	d.shared = 0
	if len(d.shares) > maxSharedKeep || len(d.strs) > maxSharedKeep {
		d.shares, d.strs = nil, nil
	}
	clear(d.shares)
	clear(d.strs)
	clear(d.members[:cap(d.members)])
	clear(d.elements[:cap(d.elements)])
	d.members, d.elements = d.members[:0], d.elements[:0]
	if cap(d.members) > maxStackKeep || cap(d.elements) > maxStackKeep || cap(d.scratch) > maxStackKeep {
		return // one huge input does not keep its stacks
	}
	select {
	case decoders <- d:
	default:
	}
}

func (d *decoder) top() (map[string]any, bool) {
	d.space()
	if d.pos >= len(d.data) {
		return nil, false
	}
	var m map[string]any
	switch d.data[d.pos] {
	case '{':
		var ok bool
		if m, ok = d.object(true, false); !ok {
			return nil, false
		}
	case 'n':
		if !d.literal("null") {
			return nil, false
		}
	default:
		return nil, false
	}
	d.space()
	return m, d.pos == len(d.data)
}

func (d *decoder) space() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *decoder) literal(word string) bool {
	if len(d.data)-d.pos < len(word) || string(d.data[d.pos:d.pos+len(word)]) != word {
		return false
	}
	d.pos += len(word)
	return true
}

// value decodes the value at d.pos (no space before it).
func (d *decoder) value() (any, bool) {
	if d.pos >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		m, ok := d.object(false, false)
		return m, ok
	case c == '[':
		return d.array()
	case c == '"':
		return d.stringValue()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return d.number()
	}
	return nil, false
}

// object decodes the object at d.pos: top is the outermost one, metadata
// the one under its "metadata" key, decoded without its managedFields when
// the object is live.
func (d *decoder) object(top, metadata bool) (map[string]any, bool) {
	if d.depth++; d.depth > maxDepth {
		return nil, false
	}
	d.pos++ // '{'
	start := len(d.members)
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		d.depth--
		return map[string]any{}, true
	}
	for {
		d.space()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, false
		}
		key, ok := d.key()
		if !ok {
			return nil, false
		}
		d.space()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, false
		}
		d.pos++
		d.space()
		switch {
		case metadata && key == "managedFields", top && d.mode == liveStatus && !statusKey(key):
			if !d.skip() {
				return nil, false
			}
		case top && d.mode != whole && key == "metadata" && d.pos < len(d.data) && d.data[d.pos] == '{':
			m, ok := d.object(false, true)
			if !ok {
				return nil, false
			}
			d.members = append(d.members, member{key, m})
		default:
			if key == SharedKey {
				d.shared++
			}
			v, ok := d.value()
			if key == SharedKey {
				d.shared--
			}
			if !ok {
				return nil, false
			}
			d.members = append(d.members, member{key, v})
		}
		d.space()
		if d.pos >= len(d.data) {
			return nil, false
		}
		c := d.data[d.pos]
		d.pos++
		if c == '}' {
			break
		}
		if c != ',' {
			return nil, false
		}
	}
	d.depth--
	return d.popMembers(start), true
}

// popMembers makes the map of the members pushed since start, a repeated
// key's last value winning (as util/json and yaml.v2 keep it), and pops
// them.
func (d *decoder) popMembers(start int) map[string]any {
	members := d.members[start:]
	var (
		h        uint64
		hashable bool
	)
	if d.sharing() {
		var m map[string]any
		if m, h, hashable = d.sharedMap(members); m != nil {
			clear(members)
			d.members = d.members[:start]
			return m
		}
	}
	m := make(map[string]any, len(members))
	for _, e := range members {
		m[e.key] = e.value
	}
	if hashable {
		d.remember(h, m)
	}
	clear(members)
	d.members = d.members[:start]
	return m
}

func (d *decoder) array() ([]any, bool) {
	if d.depth++; d.depth > maxDepth {
		return nil, false
	}
	d.pos++ // '['
	start := len(d.elements)
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		d.depth--
		return []any{}, true
	}
	for {
		d.space()
		v, ok := d.value()
		if !ok {
			return nil, false
		}
		d.elements = append(d.elements, v)
		d.space()
		if d.pos >= len(d.data) {
			return nil, false
		}
		c := d.data[d.pos]
		d.pos++
		if c == ']' {
			break
		}
		if c != ',' {
			return nil, false
		}
	}
	d.depth--
	return d.popElements(start), true
}

// popElements makes the slice of the elements pushed since start and pops
// them.
func (d *decoder) popElements(start int) []any {
	elements := d.elements[start:]
	var (
		h        uint64
		hashable bool
	)
	if d.sharing() {
		var out []any
		if out, h, hashable = d.sharedSlice(elements); out != nil {
			clear(elements)
			d.elements = d.elements[:start]
			return out
		}
	}
	out := make([]any, len(elements))
	copy(out, elements)
	if hashable {
		d.remember(h, out)
	}
	clear(elements)
	d.elements = d.elements[:start]
	return out
}

// scan reads the string at d.pos (its opening quote), returning its bytes
// between the quotes and whether they are its value as they are (no
// escapes, valid UTF-8).
func (d *decoder) scan() (raw []byte, verbatim, ok bool) {
	i := d.pos + 1
	escaped, wide := false, false
	for i < len(d.data) {
		switch c := d.data[i]; {
		case c == '"':
			raw = d.data[d.pos+1 : i]
			d.pos = i + 1
			return raw, !escaped && (!wide || utf8.Valid(raw)), true
		case c == '\\':
			escaped = true
			if i+1 >= len(d.data) {
				return nil, false, false
			}
			switch d.data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d.data) || hex4(d.data[i+2:i+6]) < 0 {
					return nil, false, false
				}
				i += 6
			default:
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		case c >= utf8.RuneSelf:
			wide = true
			i++
		default:
			i++
		}
	}
	return nil, false, false
}

func (d *decoder) key() (string, bool) {
	raw, verbatim, ok := d.scan()
	if !ok {
		return "", false
	}
	if !verbatim {
		return d.unquote(raw), true
	}
	return d.internKey(raw), true
}

func (d *decoder) stringValue() (any, bool) {
	raw, verbatim, ok := d.scan()
	if !ok {
		return nil, false
	}
	if !verbatim {
		return d.unquote(raw), true
	}
	return d.internValue(raw), true
}

// internKey and internValue are the strings of raw, shared with earlier
// decodes while the tables hold them.
func (d *decoder) internKey(raw []byte) string {
	if s, ok := d.keys[string(raw)]; ok {
		return s
	}
	s := string(raw)
	if len(s) <= maxKeyLen {
		if len(d.keys) >= maxKeys {
			clear(d.keys) // input of unique keys costs only while it lasts
		}
		d.keys[s] = s
	}
	return s
}

func (d *decoder) internValue(raw []byte) any {
	if len(raw) > maxValueLen {
		return d.str(raw)
	}
	if v, ok := d.values[string(raw)]; ok {
		return v
	}
	var v any = string(raw)
	if len(d.values) >= maxValues {
		clear(d.values)
	}
	d.values[v.(string)] = v
	return v
}

// unquote is the value of a string scan accepted, with escapes and bytes
// that are not UTF-8 replaced as encoding/json replaces them.
func (d *decoder) unquote(raw []byte) string {
	b := d.scratch[:0]
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			switch raw[i+1] {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r := rune(hex4(raw[i+2 : i+6]))
				i += 6
				if utf16.IsSurrogate(r) {
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						if r2 := hex4(raw[i+2 : i+6]); r2 >= 0 {
							if dec := utf16.DecodeRune(r, rune(r2)); dec != unicode.ReplacementChar {
								b = utf8.AppendRune(b, dec)
								i += 6
								continue
							}
						}
					}
					r = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, r)
				continue
			default: // '"', '\\', '/'
				b = append(b, raw[i+1])
			}
			i += 2
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, unicode.ReplacementChar)
			} else {
				b = append(b, raw[i:i+size]...)
			}
			i += size
		}
	}
	d.scratch = b
	return string(b)
}

// hex4 is the value of four hex digits, or -1.
func hex4(b []byte) int {
	n := 0
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		n = n<<4 | int(c)
	}
	return n
}

// number decodes the number at d.pos: int64 when its text has no '.' and
// fits, else float64, as util/json decodes numbers.
func (d *decoder) number() (any, bool) {
	start := d.pos
	i := d.pos
	if d.data[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(d.data) && '0' <= d.data[i] && d.data[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(d.data) && d.data[i] == '0' {
		i++
	} else if digits() == 0 {
		return nil, false
	}
	fraction := false
	if i < len(d.data) && d.data[i] == '.' {
		fraction = true
		i++
		if digits() == 0 {
			return nil, false
		}
	}
	exponent := false
	if i < len(d.data) && (d.data[i] == 'e' || d.data[i] == 'E') {
		exponent = true
		i++
		if i < len(d.data) && (d.data[i] == '+' || d.data[i] == '-') {
			i++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	d.pos = i
	text := d.data[start:i]
	if !fraction && !exponent && len(text) <= 18 {
		// At most 18 characters: no int64 overflows.
		var n int64
		neg := text[0] == '-'
		for _, c := range text[btoi(neg):] {
			n = n*10 + int64(c-'0')
		}
		if neg {
			n = -n
		}
		return n, true
	}
	s := string(text)
	if !fraction {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, true
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, false
	}
	return f, true
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// skip checks the value at d.pos as value would, without keeping it.
func (d *decoder) skip() bool {
	if d.pos >= len(d.data) {
		return false
	}
	switch c := d.data[d.pos]; c {
	case '{', '[':
		if d.depth++; d.depth > maxDepth {
			return false
		}
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		d.pos++
		d.space()
		if d.pos < len(d.data) && d.data[d.pos] == closing {
			d.pos++
			d.depth--
			return true
		}
		for {
			d.space()
			if c == '{' {
				if d.pos >= len(d.data) || d.data[d.pos] != '"' {
					return false
				}
				if _, _, ok := d.scan(); !ok {
					return false
				}
				d.space()
				if d.pos >= len(d.data) || d.data[d.pos] != ':' {
					return false
				}
				d.pos++
				d.space()
			}
			if !d.skip() {
				return false
			}
			d.space()
			if d.pos >= len(d.data) {
				return false
			}
			next := d.data[d.pos]
			d.pos++
			if next == closing {
				d.depth--
				return true
			}
			if next != ',' {
				return false
			}
		}
	case '"':
		_, _, ok := d.scan()
		return ok
	default:
		_, ok := d.value()
		return ok
	}
}

// Nesting is how many maps and slices the deepest of v's values is in (a
// decoded document's nesting), looked for no deeper than past limit: a
// result over limit says only that it is deeper.
func Nesting(v any, limit int) int {
	if limit < 0 {
		return 0
	}
	deepest := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			if deepest = max(deepest, Nesting(e, limit-1)); deepest > limit {
				break
			}
		}
	case []any:
		for _, e := range v {
			if deepest = max(deepest, Nesting(e, limit-1)); deepest > limit {
				break
			}
		}
	default:
		return 0
	}
	return deepest + 1
}
