package sortedkeys

import (
	"slices"
	"testing"
)

func TestStack(t *testing.T) {
	var s Stack
	outer := s.Enter(map[string]any{"b": 1, "a": 2, "c": 3})
	inner := s.Enter(map[string]any{"z": 1, "y": 2})
	if !slices.Equal(inner, []string{"y", "z"}) {
		t.Errorf("inner keys %v", inner)
	}
	s.Leave()
	// A sibling map at the inner depth reuses its slice; the outer keys
	// are untouched.
	if sibling := s.Enter(map[string]any{"x": 1}); !slices.Equal(sibling, []string{"x"}) {
		t.Errorf("sibling keys %v", sibling)
	}
	s.Leave()
	if !slices.Equal(outer, []string{"a", "b", "c"}) {
		t.Errorf("outer keys changed: %v", outer)
	}
	s.Leave()
	if s.depth != 0 || s.Largest() < 3 {
		t.Errorf("depth %d, largest %d", s.depth, s.Largest())
	}

	// Stopped part-way: Reset drops every key.
	s.Enter(map[string]any{"k": 1})
	s.Enter(map[string]any{"l": 1})
	s.Reset()
	if s.depth != 0 {
		t.Errorf("depth %d after Reset", s.depth)
	}
	for _, k := range s.keys {
		for _, v := range k[:cap(k)] {
			if v != "" {
				t.Errorf("key %q kept after Reset", v)
			}
		}
	}
}

func TestUnion(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b map[string]int
		want []string
	}{
		{"both empty", nil, nil, []string{}},
		{"one side", map[string]int{"b": 1, "a": 2}, nil, []string{"a", "b"}},
		{"other side", nil, map[string]int{"z": 1, "y": 2}, []string{"y", "z"}},
		{"shared keys once", map[string]int{"k": 1, "m": 1}, map[string]int{"k": 2, "a": 3}, []string{"a", "k", "m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Union(tc.a, tc.b); !slices.Equal(got, tc.want) {
				t.Errorf("Union = %q, want %q", got, tc.want)
			}
		})
	}
}
