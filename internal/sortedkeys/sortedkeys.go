// Package sortedkeys hands out the keys of the maps of an object being
// walked in key order (to encode or digest it), sorted, in one slice per
// nesting depth reused from map to map: the walk then allocates nothing
// once the slices have grown.
package sortedkeys

import "slices"

// Stack is the sorted keys of the maps being walked, one slice per depth.
// The zero value is ready; not safe for concurrent use.
type Stack struct {
	keys  [][]string
	depth int
}

// Enter returns m's keys sorted and goes one depth down; Leave comes back.
func (s *Stack) Enter(m map[string]any) []string {
	if s.depth == len(s.keys) {
		s.keys = append(s.keys, nil)
	}
	keys := s.keys[s.depth][:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	s.keys[s.depth] = keys
	s.depth++
	return keys
}

// Leave comes back up from the map whose keys Enter returned, dropping its
// references to them.
func (s *Stack) Leave() {
	s.depth--
	clear(s.keys[s.depth])
}

// Reset comes back to the top from wherever a walk stopped (an error
// part-way), dropping every reference to keys.
func (s *Stack) Reset() {
	for _, k := range s.keys {
		clear(k[:cap(k)])
	}
	s.depth = 0
}

// Largest is the capacity of the largest depth's slice: what a pooled
// Stack keeps.
func (s *Stack) Largest() int {
	n := 0
	for _, k := range s.keys {
		n = max(n, cap(k))
	}
	return n
}

// Union returns the keys of a and b, each once, sorted: the order in which
// two maps are compared key by key.
func Union[V any](a, b map[string]V) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
