package memo

import "slices"

// sortedKeys hands out each nesting depth's map keys sorted, in one slice
// per depth reused from map to map: walking an object in key order then
// allocates nothing once the slices have grown.
type sortedKeys struct {
	keys  [][]string
	depth int
}

// enter returns m's keys sorted and goes one depth down; leave comes back.
func (s *sortedKeys) enter(m map[string]any) []string {
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

// leave comes back up from the map whose keys enter returned, dropping its
// references to them.
func (s *sortedKeys) leave() {
	s.depth--
	clear(s.keys[s.depth])
}

// largest is the capacity of the largest depth's slice.
func (s *sortedKeys) largest() int {
	n := 0
	for _, k := range s.keys {
		n = max(n, cap(k))
	}
	return n
}
