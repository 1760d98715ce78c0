package catalogsource

import (
	"container/list"
	"sync"

	"github.com/rukpak-dev/rukpak/catalog/resolve"
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
	max     int64
	mu      sync.Mutex
	used    int64
	order   *list.List // of *cacheEntry, most recently used first
	entries map[Key]*list.Element
}

type cacheEntry struct {
	key  Key
	idx  *resolve.Index
	size int64
}

// NewCache keeps at most maxBytes (0 or less: nothing).
func NewCache(maxBytes int64) *Cache {
	return &Cache{max: maxBytes, order: list.New(), entries: map[Key]*list.Element{}}
}

// Get returns the index kept for k; indexes are immutable and shared.
func (c *Cache) Get(k Key) (*resolve.Index, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[k]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry).idx, true
}

// Add keeps idx, built from size bytes, for k. An index of more than a
// quarter of the bound is not kept, so one huge package never evicts every
// other; otherwise the least recently used make room. Entries of older
// digests of the same catalog go first: they are not read again.
func (c *Cache) Add(k Key, idx *resolve.Index, size int64) {
	if c == nil || c.max <= 0 {
		return
	}
	size = max(size, minEntryBytes)
	if size > c.max/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		c.order.MoveToFront(el)
		return
	}
	for key, el := range c.entries {
		if key.Catalog == k.Catalog && key.Package == k.Package && key.Digest != k.Digest {
			c.remove(el)
		}
	}
	for c.used+size > c.max {
		last := c.order.Back()
		if last == nil {
			break
		}
		c.remove(last)
	}
	c.entries[k] = c.order.PushFront(&cacheEntry{key: k, idx: idx, size: size})
	c.used += size
}

func (c *Cache) remove(el *list.Element) {
	e := el.Value.(*cacheEntry)
	c.order.Remove(el)
	delete(c.entries, e.key)
	c.used -= e.size
}

// Len is the number of kept indexes.
func (c *Cache) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
