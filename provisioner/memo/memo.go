// Package memo keeps the objects decoded from a Bundle's content, so a
// reconcile whose inputs did not change does not load, decode and convert
// them again. The cache is bounded in bytes: a hostile or huge bundle can
// neither fill it nor push out the entries of others.
package memo

import (
	"crypto/sha256"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rukpak-dev/rukpak/internal/sizedlru"
)

// DefaultMaxBytes bounds a Cache by default: the decoded objects of sixty
// real operators (the benchmark fleet) take about 34 MiB.
const DefaultMaxBytes = 64 << 20

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

// Cache is a least-recently-used cache of decoded objects bounded by their
// estimated size in memory. Safe for concurrent use; the zero value keeps
// nothing.
type Cache struct {
	lru *sizedlru.Cache[Key, []*unstructured.Unstructured]
}

// New returns a cache holding at most maxBytes of objects (as SizeOf
// estimates them); 0 or less keeps nothing. Objects estimated at more than
// a quarter of the bound are not kept, so one huge bundle never evicts the
// entries of many others.
func New(maxBytes int64) *Cache {
	return &Cache{lru: sizedlru.New[Key, []*unstructured.Unstructured](sizedlru.Limits{MaxBytes: maxBytes, MaxEntryBytes: maxBytes / 4})}
}

// MaxBytes is the cache's bound.
func (c *Cache) MaxBytes() int64 {
	if c == nil {
		return 0
	}
	return c.lru.MaxBytes()
}

// Get returns a deep copy of the objects kept for k, which the caller may
// change freely, and marks them recently used.
func (c *Cache) Get(k Key) ([]*unstructured.Unstructured, bool) {
	if c == nil {
		return nil, false
	}
	// Kept objects are never changed once added: copied outside the lock.
	objs, ok := c.lru.Get(k)
	if !ok {
		return nil, false
	}
	return deepCopyAll(objs), true
}

// Add keeps a deep copy of objs for k and reports whether it did (not
// above a quarter of the bound).
func (c *Cache) Add(k Key, objs []*unstructured.Unstructured) bool {
	if c == nil || c.lru.MaxBytes() <= 0 {
		return false
	}
	// The same inputs decode to the same objects: keep the first.
	if _, ok := c.lru.Get(k); ok {
		return true
	}
	size := SizeOf(objs)
	if size > c.lru.MaxBytes()/4 {
		return false
	}
	return c.lru.Add(k, deepCopyAll(objs), size)
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

func deepCopyAll(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopy()
	}
	return out
}

// Estimated heap bytes of the parts of a decoded object, as Go lays them
// out: a map is a header and groups of eight slots (a control word and
// eight key/value pairs of 16 + 16 bytes), at most 7/8 full and a power of
// two of groups beyond one; a string or slice stored in an interface is a
// boxed header; every allocation rounds up to its size class.
const (
	mapBytes    = 48
	groupBytes  = 8 + 8*(16+16)
	sliceBox    = 24
	sliceElem   = 16
	stringBox   = 16
	scalarBytes = 8
	objectBytes = 8 + 16 // *Unstructured and its Object field
)

// SizeOf estimates the heap bytes objs hold: close enough to bound a
// cache by (within a tenth of what the runtime reports for real
// manifests), growing with every key, value and element.
func SizeOf(objs []*unstructured.Unstructured) int64 {
	n := roundUp(int64(8 * len(objs)))
	for _, o := range objs {
		if o == nil {
			continue
		}
		n += roundUp(objectBytes) + sizeOfMap(o.Object)
	}
	return n
}

func sizeOfMap(m map[string]any) int64 {
	groups := int64(1)
	if len(m) > 8 {
		for groups*7 < int64(len(m)) {
			groups *= 2
		}
	}
	n := roundUp(mapBytes) + roundUp(groups*groupBytes)
	for k, v := range m {
		n += roundUp(int64(len(k))) + sizeOfValue(v)
	}
	return n
}

func sizeOfValue(v any) int64 {
	switch v := v.(type) {
	case map[string]any:
		return sizeOfMap(v)
	case []any:
		n := roundUp(sliceBox) + roundUp(int64(sliceElem*cap(v)))
		for _, e := range v {
			n += sizeOfValue(e)
		}
		return n
	case string:
		return roundUp(stringBox) + roundUp(int64(len(v)))
	case bool, nil:
		return 0
	default:
		return scalarBytes
	}
}

// roundUp rounds an allocation of n bytes up to (about) its size class.
func roundUp(n int64) int64 {
	var step int64
	switch {
	case n == 0:
		return 0
	case n <= 16:
		step = 8
	case n <= 256:
		step = 16
	case n <= 512:
		step = 32
	case n <= 1024:
		step = 64
	case n <= 2048:
		step = 256
	case n <= 8192:
		step = 1024
	default:
		step = 8192
	}
	return (n + step - 1) / step * step
}
