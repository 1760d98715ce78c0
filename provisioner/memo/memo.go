// Package memo keeps the objects decoded from a Bundle's content, so a
// reconcile whose inputs did not change does not load, decode and convert
// them again. The cache is bounded in bytes: a hostile or huge bundle can
// neither fill it nor push out the entries of others.
//
// Objects are kept as compact JSON, not as decoded maps: a decoded object
// takes about four times its JSON in heap (a map header and slots per
// object, a boxed header per string), and every Get has to hand out a copy
// the caller may change anyway, which decoding the JSON is. The YAML a
// bundle is written in, its conversion and its templates are what a hit
// spares; decoding JSON is a small part of that.
package memo

import (
	"crypto/sha256"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rukpak-dev/rukpak/internal/jsonmap"
	"github.com/rukpak-dev/rukpak/internal/sizedlru"
)

// DefaultMaxBytes bounds a Cache by default: the objects of sixty real
// operators (the benchmark fleet) take 7.8 MiB as JSON.
const DefaultMaxBytes = 24 << 20

// Key names what a Bundle's objects were decoded from. Content is the
// SHA-256 of the archive as this process stores it and read it (never a
// digest a status reports: whoever writes a status could point it at other
// content); Config is the SHA-256 of spec.config's exact bytes.
type Key struct {
	Content [sha256.Size]byte
	Class   string
	Config  [sha256.Size]byte
}

// ConfigKey is the Config part of a Key for raw, spec.config's bytes.
func ConfigKey(raw []byte) [sha256.Size]byte { return sha256.Sum256(raw) }

// entry is a list of objects as JSON: object i is data[ends[i-1]:ends[i]].
type entry struct {
	data []byte
	ends []int
}

// entryOverhead is what an entry holds besides its JSON: the entry, its
// slice headers and the cache's bookkeeping.
const entryOverhead = 256

func (e *entry) size() int64 { return int64(len(e.data)+8*len(e.ends)) + entryOverhead }

// Cache is a least-recently-used cache of decoded objects bounded by the
// bytes it holds. Safe for concurrent use; the zero value keeps nothing.
type Cache struct {
	lru *sizedlru.Cache[Key, *entry]
}

// New returns a cache holding at most maxBytes of objects' JSON; 0 or less
// keeps nothing. Objects over a quarter of the bound are not kept, so one
// huge bundle never evicts the entries of many others.
func New(maxBytes int64) *Cache {
	return &Cache{lru: sizedlru.New[Key, *entry](sizedlru.Limits{MaxBytes: maxBytes, MaxEntryBytes: maxBytes / 4})}
}

// MaxBytes is the cache's bound.
func (c *Cache) MaxBytes() int64 {
	if c == nil {
		return 0
	}
	return c.lru.MaxBytes()
}

// Get returns the objects kept for k, newly decoded (the caller may change
// them freely), and marks them recently used. A kept entry that no longer
// decodes (it cannot happen: it was encoded here) is dropped as a miss.
func (c *Cache) Get(k Key) ([]*unstructured.Unstructured, bool) {
	if c == nil {
		return nil, false
	}
	// Kept entries are never changed once added: decoded outside the lock.
	e, ok := c.lru.Get(k)
	if !ok {
		return nil, false
	}
	objs, err := e.decode()
	if err != nil {
		c.lru.Remove(k)
		return nil, false
	}
	return objs, true
}

// Add keeps objs for k and reports whether it did (not when their JSON is
// over a quarter of the bound, or they hold a value JSON cannot encode).
func (c *Cache) Add(k Key, objs []*unstructured.Unstructured) bool {
	if c == nil || c.lru.MaxBytes() <= 0 {
		return false
	}
	// The same inputs decode to the same objects: keep the first.
	if c.lru.Contains(k) {
		return true
	}
	e, err := encode(objs, c.lru.MaxBytes()/4)
	if err != nil {
		return false
	}
	return c.lru.Add(k, e, e.size())
}

// decode decodes as the plain format decodes JSON: integers stay int64.
func (e *entry) decode() ([]*unstructured.Unstructured, error) {
	objs := make([]*unstructured.Unstructured, len(e.ends))
	start := 0
	for i, end := range e.ends {
		m, err := jsonmap.Unmarshal(e.data[start:end])
		if err != nil {
			return nil, err
		}
		if m != nil {
			objs[i] = &unstructured.Unstructured{Object: m}
		}
		start = end
	}
	return objs, nil
}

// Stats are the cache's entries and their estimated bytes.
func (c *Cache) Stats() (entries int, bytes int64) {
	if c == nil {
		return 0, 0
	}
	return c.lru.Stats()
}

// Contains says whether k is kept, without marking it used.
func (c *Cache) Contains(k Key) bool {
	if c == nil {
		return false
	}
	return c.lru.Contains(k)
}
