package jsonmap

import (
	"cmp"
	"reflect"
	"slices"
	"sync"
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
// under the key; it is walked and counted once, and where it is met
// again its height is held to the depth left there. It also estimates the
// heap the values hold. It looks no deeper than past maxDepth nesting (a
// cycle included, under the key too) and at no more than maxParts maps,
// slices and strings, and says false past either.
func Owned(maxDepth, maxParts int, values ...any) (heap int64, ok bool) {
	s := ownedScratches.Get().(*ownedScratch)
	defer s.put()
	// Counted first, so that the spans are allocated once at their number.
	count := ownedWalk{left: maxParts, counting: true, seen: s.seen}
	for _, v := range values {
		if _, ok := count.value(v, maxDepth); !ok {
			s.seen = count.seen
			return 0, false
		}
	}
	clear(count.seen)
	s.seen = count.seen
	if cap(s.parts) < count.spans {
		s.parts = make([]span, 0, count.spans)
	}
	w := ownedWalk{left: maxParts, parts: s.parts[:0], seen: s.seen}
	defer func() { s.parts = w.parts }()
	for _, v := range values {
		if _, ok := w.value(v, maxDepth); !ok {
			return 0, false
		}
	}
	// Each part under SharedKey is in parts once, however often it was
	// reached there: any overlap is a part reached from outside the key
	// too, or parts that are not whole decoded values.
	slices.SortFunc(w.parts, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	for i := 1; i < len(w.parts); i++ {
		if w.parts[i].start < w.parts[i-1].end {
			return 0, false
		}
	}
	return w.heap, true
}

// ownedScratch is what one Owned call needs beyond its walk: kept for the
// next call (an unpack checks every bundle's objects, and these grew to the
// size of a large CRD's schema each time), in a sync.Pool so that an idle
// provisioner holds none of it.
type ownedScratch struct {
	parts []span
	seen  map[shareable]int
}

// Past these sizes the scratch of one call is not kept.
const (
	keepParts = 1 << 16
	keepSeen  = 1 << 15
)

var ownedScratches = sync.Pool{New: func() any { return new(ownedScratch) }}

func (s *ownedScratch) put() {
	if cap(s.parts) > keepParts {
		s.parts = nil
	}
	if len(s.seen) > keepSeen {
		s.seen = nil
	}
	clear(s.seen)
	s.parts = s.parts[:0]
	ownedScratches.Put(s)
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
	// under is how many SharedKey values hold the value walked; seen
	// holds the parts met under one, with their height (inProgress while
	// they are walked: met again then, they hold themselves).
	under int
	seen  map[shareable]int
}

// shareable is a part under SharedKey: a map by its header, a slice by
// its elements (two slices of one array are two parts).
type shareable struct {
	start    uintptr
	len, cap int
}

const inProgress = -1

// again says whether the part under SharedKey was met before, and if so
// whether it is acceptable where it is met again: walked to its end
// (not a cycle), and no taller than the depth left there. A part met for
// the first time is noted as being walked (see walked).
func (w *ownedWalk) again(p shareable, depth int) (met, ok bool) {
	if w.under == 0 {
		return false, false
	}
	if h, seen := w.seen[p]; seen {
		return true, h != inProgress && h <= depth
	}
	if w.seen == nil {
		w.seen = map[shareable]int{}
	}
	w.seen[p] = inProgress
	return false, false
}

// walked notes the height of a part under SharedKey walked to its end.
func (w *ownedWalk) walked(p shareable, height int) {
	if w.under > 0 {
		w.seen[p] = height
	}
}

func (w *ownedWalk) add(p span) {
	if w.counting {
		w.spans++
		return
	}
	w.parts = append(w.parts, p)
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

// value walks v with depth levels of nesting left, returning its height
// (the depth it needs: 0 for a scalar or an empty map or slice, one more
// than its tallest member's otherwise).
func (w *ownedWalk) value(v any, depth int) (int, bool) {
	if depth < 0 {
		return 0, false
	}
	if w.left--; w.left < 0 {
		return 0, false
	}
	switch v := v.(type) {
	case nil, bool:
		return 0, true
	case int64, float64:
		w.heap += boxed
		return 0, true
	case string:
		w.heap += strHeader + int64(len(v))
		return 0, utf8.ValidString(v)
	case map[string]any:
		if v == nil {
			return 0, false
		}
		p := uintptr(reflect.ValueOf(v).UnsafePointer())
		part := shareable{start: p}
		if met, ok := w.again(part, depth); met {
			return w.seen[part], ok
		}
		w.add(span{p, p + 1})
		w.heap += mapHeader + mapGroup*int64((len(v)+7)/8)
		height := 0
		for k, e := range v {
			w.heap += int64(len(k))
			if !utf8.ValidString(k) {
				return 0, false
			}
			if k == SharedKey {
				w.under++
			}
			h, ok := w.value(e, depth-1)
			if k == SharedKey {
				w.under--
			}
			if !ok {
				return 0, false
			}
			height = max(height, h+1)
		}
		w.walked(part, height)
		return height, true
	case []any:
		if v == nil {
			return 0, false
		}
		var part shareable
		if cap(v) > 0 {
			p := uintptr(unsafe.Pointer(unsafe.SliceData(v)))
			part = shareable{p, len(v), cap(v)}
			if met, ok := w.again(part, depth); met {
				return w.seen[part], ok
			}
			w.add(span{p, p + uintptr(cap(v))*unsafe.Sizeof(any(nil))})
		}
		w.heap += sliceHeader + anyBytes*int64(cap(v))
		height := 0
		for _, e := range v {
			h, ok := w.value(e, depth-1)
			if !ok {
				return 0, false
			}
			height = max(height, h+1)
		}
		if cap(v) > 0 {
			w.walked(part, height)
		}
		return height, true
	}
	return 0, false
}
