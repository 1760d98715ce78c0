// Package sizedlru is a least-recently-used cache bounded by the sizes its
// callers give their entries, and optionally by their number. The caches
// of decoded bundles, catalog indexes and helm renders share it: what
// bounds each is the bytes its entries hold, and one entry larger than
// MaxEntryBytes is never kept, so a huge input cannot push out everyone
// else's.
package sizedlru

import (
	"container/list"
	"sync"
)

// Limits bound a Cache. A zero MaxBytes keeps nothing.
type Limits struct {
	// MaxBytes bounds the sum of the entries' sizes.
	MaxBytes int64
	// MaxEntryBytes bounds one entry (0: MaxBytes).
	MaxEntryBytes int64
	// MinEntryBytes is what an entry counts at least, so MaxBytes also
	// bounds the number of entries of tiny or empty values.
	MinEntryBytes int64
	// MaxEntries bounds their number (0: no bound but MaxBytes).
	MaxEntries int
}

// Cache is safe for concurrent use. A nil Cache keeps nothing. Values are
// shared with callers: keep only values nobody changes once added.
type Cache[K comparable, V any] struct {
	limits  Limits
	mu      sync.Mutex
	used    int64
	order   *list.List // of *entry[K, V], most recently used first
	entries map[K]*list.Element
}

type entry[K comparable, V any] struct {
	key  K
	val  V
	size int64
}

// New returns an empty cache within l.
func New[K comparable, V any](l Limits) *Cache[K, V] {
	if l.MaxEntryBytes <= 0 || l.MaxEntryBytes > l.MaxBytes {
		l.MaxEntryBytes = l.MaxBytes
	}
	return &Cache[K, V]{limits: l, order: list.New(), entries: map[K]*list.Element{}}
}

// MaxBytes is the cache's bound in bytes.
func (c *Cache[K, V]) MaxBytes() int64 {
	if c == nil {
		return 0
	}
	return c.limits.MaxBytes
}

// Get returns the value kept for k and marks it recently used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	var zero V
	if c == nil {
		return zero, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[k]
	if !ok {
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*entry[K, V]).val, true
}

// Contains says whether k is kept, without marking it used.
func (c *Cache[K, V]) Contains(k K) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.entries[k]
	return ok
}

// Add keeps v, of size bytes, for k (replacing what k held) and reports
// whether it did: a value above MaxEntryBytes is not kept. The least
// recently used entries make room.
func (c *Cache[K, V]) Add(k K, v V, size int64) bool {
	if c == nil || c.limits.MaxBytes <= 0 {
		return false
	}
	size = max(size, c.limits.MinEntryBytes)
	if size > c.limits.MaxEntryBytes {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		c.remove(el)
	}
	for c.used+size > c.limits.MaxBytes || (c.limits.MaxEntries > 0 && c.order.Len() >= c.limits.MaxEntries) {
		last := c.order.Back()
		if last == nil {
			break
		}
		c.remove(last)
	}
	c.entries[k] = c.order.PushFront(&entry[K, V]{key: k, val: v, size: size})
	c.used += size
	return true
}

// Remove drops k.
func (c *Cache[K, V]) Remove(k K) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		c.remove(el)
	}
}

// RemoveFunc drops every entry drop returns true for; drop runs under the
// cache's lock and must not call it.
func (c *Cache[K, V]) RemoveFunc(drop func(K, V) bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.order.Back(); el != nil; {
		prev := el.Prev()
		if e := el.Value.(*entry[K, V]); drop(e.key, e.val) {
			c.remove(el)
		}
		el = prev
	}
}

// Stats are the number of entries and the sum of their sizes.
func (c *Cache[K, V]) Stats() (entries int, bytes int64) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), c.used
}

func (c *Cache[K, V]) remove(el *list.Element) {
	e := el.Value.(*entry[K, V])
	c.order.Remove(el)
	delete(c.entries, e.key)
	c.used -= e.size
}
