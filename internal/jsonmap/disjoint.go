package jsonmap

import (
	"cmp"
	"reflect"
	"slices"
	"unsafe"
)

// Disjoint reports whether no map and no slice's backing array is reached
// twice from values, within one value or across them: values whose every
// part is their own, so that changing one never changes another (as values
// decoded apart are). Values built in code may share a part, for instance
// one labels map set on two objects; a decoder never does. It looks no
// deeper than past maxDepth nesting (a cycle included) and says false
// there.
func Disjoint(maxDepth int, values ...any) bool {
	// Counted first, so the spans are allocated once at their number.
	n := 0
	for _, v := range values {
		if n += countParts(v, maxDepth); n < 0 {
			return false
		}
	}
	parts := make([]span, 0, n)
	for _, v := range values {
		if !collectSpans(v, maxDepth, &parts) {
			return false
		}
	}
	slices.SortFunc(parts, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	for i := 1; i < len(parts); i++ {
		if parts[i].start < parts[i-1].end {
			return false
		}
	}
	return true
}

// span is the memory a map header or a slice's capacity occupies.
type span struct{ start, end uintptr }

func collectSpans(v any, depth int, parts *[]span) bool {
	if depth < 0 {
		return false
	}
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return true
		}
		p := uintptr(reflect.ValueOf(v).UnsafePointer())
		*parts = append(*parts, span{p, p + 1})
		for _, e := range v {
			if !collectSpans(e, depth-1, parts) {
				return false
			}
		}
	case []any:
		if cap(v) > 0 {
			p := uintptr(unsafe.Pointer(unsafe.SliceData(v)))
			*parts = append(*parts, span{p, p + uintptr(cap(v))*unsafe.Sizeof(any(nil))})
		}
		for _, e := range v {
			if !collectSpans(e, depth-1, parts) {
				return false
			}
		}
	}
	return true
}

// countParts is how many maps and non-empty slices v holds, -1 past
// maxDepth.
func countParts(v any, depth int) int {
	if depth < 0 {
		return -1
	}
	n := 0
	switch v := v.(type) {
	case map[string]any:
		n = 1
		for _, e := range v {
			c := countParts(e, depth-1)
			if c < 0 {
				return -1
			}
			n += c
		}
	case []any:
		if cap(v) > 0 {
			n = 1
		}
		for _, e := range v {
			c := countParts(e, depth-1)
			if c < 0 {
				return -1
			}
			n += c
		}
	}
	return n
}
