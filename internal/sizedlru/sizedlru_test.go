package sizedlru

import (
	"fmt"
	"testing"
)

func TestCache(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits Limits
		adds   []int64 // sizes of keys 0, 1, 2, ...
		kept   []int
	}{
		{name: "within the bound", limits: Limits{MaxBytes: 100}, adds: []int64{10, 20, 30}, kept: []int{0, 1, 2}},
		{name: "least recently added goes first", limits: Limits{MaxBytes: 50}, adds: []int64{20, 20, 20}, kept: []int{1, 2}},
		{name: "an entry above MaxEntryBytes is not kept and evicts nothing", limits: Limits{MaxBytes: 100, MaxEntryBytes: 25}, adds: []int64{20, 26, 20}, kept: []int{0, 2}},
		{name: "MinEntryBytes counts tiny entries", limits: Limits{MaxBytes: 100, MinEntryBytes: 40}, adds: []int64{0, 0, 0}, kept: []int{1, 2}},
		{name: "MaxEntries", limits: Limits{MaxBytes: 100, MaxEntries: 2}, adds: []int64{1, 1, 1}, kept: []int{1, 2}},
		{name: "zero bound keeps nothing", limits: Limits{}, adds: []int64{0, 1}, kept: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New[int, string](tc.limits)
			for k, size := range tc.adds {
				c.Add(k, fmt.Sprint(k), size)
			}
			var kept []int
			for k := range tc.adds {
				if c.Contains(k) {
					kept = append(kept, k)
				}
			}
			if fmt.Sprint(kept) != fmt.Sprint(tc.kept) {
				t.Fatalf("kept %v, want %v", kept, tc.kept)
			}
		})
	}
}

func TestGetMarksRecentlyUsed(t *testing.T) {
	c := New[string, int](Limits{MaxBytes: 2})
	c.Add("a", 1, 1)
	c.Add("b", 2, 1)
	if v, ok := c.Get("a"); !ok || v != 1 {
		t.Fatalf("Get(a) = %v, %v", v, ok)
	}
	c.Add("c", 3, 1)
	if !c.Contains("a") || c.Contains("b") {
		t.Fatal("the entry read last was evicted instead of the one read least recently")
	}
	// Replacing a key counts its new size once.
	c.Add("a", 4, 1)
	if n, bytes := c.Stats(); n != 2 || bytes != 2 {
		t.Fatalf("stats %d entries, %d bytes; want 2, 2", n, bytes)
	}
	c.RemoveFunc(func(k string, v int) bool { return v == 4 })
	c.Remove("c")
	if n, bytes := c.Stats(); n != 0 || bytes != 0 {
		t.Fatalf("stats after removals %d, %d", n, bytes)
	}
	var nilCache *Cache[string, int]
	if nilCache.Add("x", 1, 1) || nilCache.Contains("x") {
		t.Fatal("a nil cache kept something")
	}
}
