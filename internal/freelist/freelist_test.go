package freelist

import (
	"runtime"
	"testing"
)

func TestKeepsUpToItsSizeAcrossCollections(t *testing.T) {
	made := 0
	l := New(2, func() *[]byte { made++; b := make([]byte, 1<<20); return &b })
	a, b, c := l.Get(), l.Get(), l.Get()
	if made != 3 {
		t.Fatalf("%d made for three Gets of an empty list", made)
	}
	l.Put(a)
	l.Put(b)
	l.Put(c) // over the size: let go
	runtime.GC()
	runtime.GC() // a sync.Pool would be empty now
	got := map[*[]byte]bool{l.Get(): true, l.Get(): true}
	if made != 3 || !got[a] || !got[b] {
		t.Errorf("after two collections: %d made, kept %v, want a and b without making more", made, got)
	}
	if l.Get() == c || made != 4 {
		t.Errorf("a value put past the size was kept (%d made)", made)
	}
}
