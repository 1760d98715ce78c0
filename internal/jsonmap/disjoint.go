package jsonmap

import (
	"cmp"
	"reflect"
	"slices"
	"unicode/utf8"
	"unsafe"
)

// Owned reports whether values are as decoding JSON gives them and share
// nothing: every value a map[string]any (not nil), []any (not nil),
// string and key of valid UTF-8, int64, float64, bool or nil, and no map
// and no slice's backing array reached twice, within one value or across
// them, so that changing one never changes another (as values decoded
// apart are). Values built in code may hold other types, invalid UTF-8
// (which encoding replaces) or one part in two places, for instance one
// labels map set on two objects; a decoder never does. Under SharedKey,
// where decoding shares equal subtrees of one document and nothing is
// changed in place, a part may be reached more than once, but only from
// under the key. It also estimates the heap the values hold (a part
// reached twice counted twice). It looks no deeper than past maxDepth nesting
// (a cycle included) and at no more than maxParts maps, slices and
// strings, and says false past either.
func Owned(maxDepth, maxParts int, values ...any) (heap int64, ok bool) {
	// Counted first, so that the spans are allocated once at their number.
	count := ownedWalk{left: maxParts, counting: true}
	for _, v := range values {
		if !count.value(v, maxDepth) {
			return 0, false
		}
	}
	w := ownedWalk{left: maxParts, parts: make([]span, 0, count.spans+count.shareableCount), shareable: make([]span, 0, count.shareableCount)}
	for _, v := range values {
		if !w.value(v, maxDepth) {
			return 0, false
		}
	}
	// A part under SharedKey once, however often it was reached there:
	// any overlap left is a part reached from outside the key too, or
	// parts that are not whole decoded values.
	byStart := func(a, b span) int { return cmp.Compare(a.start, b.start) }
	slices.SortFunc(w.shareable, byStart)
	w.parts = append(w.parts, slices.Compact(w.shareable)...)
	slices.SortFunc(w.parts, byStart)
	for i := 1; i < len(w.parts); i++ {
		if w.parts[i].start < w.parts[i-1].end {
			return 0, false
		}
	}
	return w.heap, true
}

// span is the memory a map header or a slice's capacity occupies.
type span struct{ start, end uintptr }

type ownedWalk struct {
	parts []span
	heap  int64
	left  int
	// counting: spans are only counted.
	counting bool
	spans    int
	// under is how many SharedKey values hold the value walked: parts
	// under one go to shareable (counted in shareableCount).
	under          int
	shareable      []span
	shareableCount int
}

func (w *ownedWalk) add(p span) {
	switch {
	case w.counting && w.under > 0:
		w.shareableCount++
	case w.counting:
		w.spans++
	case w.under > 0:
		w.shareable = append(w.shareable, p)
	default:
		w.parts = append(w.parts, p)
	}
}

// The estimate: a map's header and its groups of eight slots of a key
// and a value; a slice's header and elements; a string's header and bytes
// (shared ones counted each time); an interface's boxed number.
const (
	mapHeader   = 48
	mapGroup    = 8 + 8*(16+16)
	sliceHeader = 24
	anyBytes    = 16
	strHeader   = 16
	boxed       = 8
)

func (w *ownedWalk) value(v any, depth int) bool {
	if depth < 0 {
		return false
	}
	if w.left--; w.left < 0 {
		return false
	}
	switch v := v.(type) {
	case nil, bool:
		return true
	case int64, float64:
		w.heap += boxed
		return true
	case string:
		w.heap += strHeader + int64(len(v))
		return utf8.ValidString(v)
	case map[string]any:
		if v == nil {
			return false
		}
		p := uintptr(reflect.ValueOf(v).UnsafePointer())
		w.add(span{p, p + 1})
		w.heap += mapHeader + mapGroup*int64((len(v)+7)/8)
		for k, e := range v {
			w.heap += int64(len(k))
			if !utf8.ValidString(k) {
				return false
			}
			if k == SharedKey {
				w.under++
			}
			ok := w.value(e, depth-1)
			if k == SharedKey {
				w.under--
			}
			if !ok {
				return false
			}
		}
		return true
	case []any:
		if v == nil {
			return false
		}
		if cap(v) > 0 {
			p := uintptr(unsafe.Pointer(unsafe.SliceData(v)))
			w.add(span{p, p + uintptr(cap(v))*unsafe.Sizeof(any(nil))})
		}
		w.heap += sliceHeader + anyBytes*int64(cap(v))
		for _, e := range v {
			if !w.value(e, depth-1) {
				return false
			}
		}
		return true
	}
	return false
}
