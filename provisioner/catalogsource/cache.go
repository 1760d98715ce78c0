package catalogsource

import (
	"github.com/rukpak-dev/rukpak/catalog/resolve"
	"github.com/rukpak-dev/rukpak/internal/sizedlru"
)

// DefaultCacheBytes bounds a Cache by default: the package documents its
// indexes were built from, as read.
const DefaultCacheBytes = 64 << 20

// minEntryBytes is what an entry counts at least, so the bound also bounds
// the number of entries (empty indexes of packages a catalog lacks).
const minEntryBytes = 4 << 10

// Key names one package of one catalog content. Digest is the Catalog's
// status.contentDigest when it was listed: a status writer who changes it
// only causes another read of the same package, which the content
// service, not the status, answers.
type Key struct {
	Catalog, Digest, Package string
}

// Cache keeps built indexes, least recently used first out, bounded by the
// size of the documents they were built from. Safe for concurrent use; a
// nil Cache keeps nothing.
type Cache struct {
	lru *sizedlru.Cache[Key, *resolve.Index]
}

// NewCache keeps at most maxBytes (0 or less: nothing). An index of more
// than a quarter of the bound is not kept, so one huge package never
// evicts every other.
func NewCache(maxBytes int64) *Cache {
	return &Cache{lru: sizedlru.New[Key, *resolve.Index](sizedlru.Limits{MaxBytes: maxBytes, MaxEntryBytes: maxBytes / 4, MinEntryBytes: minEntryBytes})}
}

// Get returns the index kept for k; indexes are immutable and shared.
func (c *Cache) Get(k Key) (*resolve.Index, bool) {
	if c == nil {
		return nil, false
	}
	return c.lru.Get(k)
}

// Add keeps idx, built from size bytes, for k. Entries of older digests of
// the same catalog go first: they are not read again.
func (c *Cache) Add(k Key, idx *resolve.Index, size int64) {
	if c == nil || c.lru.Contains(k) {
		return
	}
	c.lru.RemoveFunc(func(key Key, _ *resolve.Index) bool {
		return key.Catalog == k.Catalog && key.Package == k.Package && key.Digest != k.Digest
	})
	c.lru.Add(k, idx, size)
}

// Len is the number of kept indexes.
func (c *Cache) Len() int {
	if c == nil {
		return 0
	}
	n, _ := c.lru.Stats()
	return n
}
