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
//
// Prime is the one way in for objects not decoded: registry+v1 conversion
// renders a bundle's objects when it is unpacked, and hands them over with
// their JSON, so that the first install of that content takes them as they
// are and even the JSON is never decoded. They wait for it under a bound of
// their own.
package memo

import (
	"container/list"
	"crypto/sha256"
	"sync"
	"time"

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
// content); Decoder names the function that decoded them (equal names
// decode equal content and config to equal objects); Config is the SHA-256
// of spec.config's exact bytes.
type Key struct {
	Content [sha256.Size]byte
	Decoder string
	Config  [sha256.Size]byte
}

// ConfigKey is the Config part of a Key for raw, spec.config's bytes.
func ConfigKey(raw []byte) [sha256.Size]byte { return sha256.Sum256(raw) }

// entry is a list of objects as JSON, one slice each, and perhaps the
// objects themselves, handed over by Prime for the first Get to take.
type entry struct {
	objects [][]byte

	// Guarded by the Cache's mu.
	owned      []*unstructured.Unstructured
	ownedBytes int64
	primed     time.Time
	queued     *list.Element
}

// entryOverhead is what an entry holds besides its JSON: the entry, its
// slice headers and the cache's bookkeeping.
const entryOverhead = 256

func (e *entry) size() int64 {
	n := int64(entryOverhead + 24*len(e.objects))
	for _, o := range e.objects {
		n += int64(len(o))
	}
	return n
}

// Cache is a least-recently-used cache of decoded objects bounded by the
// bytes it holds. Safe for concurrent use; the zero value keeps nothing.
//
// Objects handed over by Prime wait for their first Get apart from that
// bound, under one of their own twice as large (ownedShare): when it is
// full, newer objects are not kept (their JSON is), unless the oldest
// waited over ownedWait, which are let go to make room, whether their
// entry is still kept or not; none waits past ownedExpiry.
type Cache struct {
	lru *sizedlru.Cache[Key, *entry]

	mu         sync.Mutex
	owned      list.List // of *entry holding objects, oldest first
	ownedBytes int64
	now        func() time.Time // for tests; nil: time.Now
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

// Get returns the objects kept for k, newly decoded or handed over by
// Prime (the caller may change them freely), and marks them recently used.
// A kept entry that no longer decodes (it cannot happen: it was encoded
// here) is dropped as a miss.
func (c *Cache) Get(k Key) ([]*unstructured.Unstructured, bool) {
	if c == nil {
		return nil, false
	}
	// Kept entries' JSON is never changed once added: decoded outside the
	// lock.
	e, ok := c.lru.Get(k)
	if !ok {
		return nil, false
	}
	if objs := c.take(e); objs != nil {
		return objs, true
	}
	objs, err := e.decode()
	if err != nil {
		c.lru.Remove(k)
		return nil, false
	}
	return objs, true
}

// Prime keeps for k objects made elsewhere than by decoding: objs[i] is
// what decoding data[i], a JSON object, gives, and shares no map or slice
// with another object or within itself but as decoding does
// (jsonmap.Owned); heap estimates the bytes they hold. objs are handed over: the first Get takes them as they are, later
// ones decode data. It reports whether it kept them (their JSON within the
// bound as Add's; the objects themselves only while the room for
// handed-over objects holds them). Data is kept, not copied: the caller
// must not change it. Nothing is replaced: the same key names the same
// objects.
func (c *Cache) Prime(k Key, data [][]byte, objs []*unstructured.Unstructured, heap int64) bool {
	if c == nil || c.lru.MaxBytes() <= 0 || len(data) != len(objs) || c.lru.Contains(k) {
		return false
	}
	e := &entry{objects: data}
	if !c.lru.Add(k, e, e.size()) {
		return false
	}
	maxOwned := ownedShare * c.lru.MaxBytes()
	if heap <= 0 || heap > maxOwned/4 {
		return true
	}
	now := c.clock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(now)
	// Room is made by letting go of objects nobody took for a while (their
	// install is elsewhere, or gone); objects waiting less are taken
	// first, as installs run in about the order their Bundles unpack.
	for c.ownedBytes+heap > maxOwned {
		oldest := c.owned.Front()
		if oldest == nil || now.Sub(oldest.Value.(*entry).primed) < ownedWait {
			return true
		}
		c.release(oldest.Value.(*entry))
	}
	e.owned, e.ownedBytes, e.primed = objs, heap, now
	e.queued = c.owned.PushBack(e)
	c.ownedBytes += heap
	return true
}

// ownedShare is the bound of handed-over objects waiting (their estimated
// heap), as a multiple of the cache's: real objects take about four times
// the bytes of their JSON, and at twice the default bound sixty real
// operators applied at once (the benchmark fleet) all wait as they were
// rendered.
const ownedShare = 2

// ownedWait is how long handed-over objects wait for their install before
// newer ones may take their room; after ownedExpiry they are let go
// whatever the room (a Bundle nothing installs holds nothing for long).
const (
	ownedWait   = time.Minute
	ownedExpiry = 5 * time.Minute
)

// expire lets go of objects waiting longer than ownedExpiry; c.mu is
// held.
func (c *Cache) expire(now time.Time) {
	for oldest := c.owned.Front(); oldest != nil && now.Sub(oldest.Value.(*entry).primed) >= ownedExpiry; oldest = c.owned.Front() {
		c.release(oldest.Value.(*entry))
	}
}

func (c *Cache) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// take returns the objects handed over with e, once.
func (c *Cache) take(e *entry) []*unstructured.Unstructured {
	now := c.clock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(now)
	objs := e.owned
	if objs != nil {
		c.release(e)
	}
	return objs
}

// release lets go of e's handed-over objects; c.mu is held.
func (c *Cache) release(e *entry) {
	c.owned.Remove(e.queued)
	c.ownedBytes -= e.ownedBytes
	e.owned, e.ownedBytes, e.queued = nil, 0, nil
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
	objs := make([]*unstructured.Unstructured, len(e.objects))
	for i, data := range e.objects {
		m, err := jsonmap.Unmarshal(data)
		if err != nil {
			return nil, err
		}
		if m != nil {
			objs[i] = &unstructured.Unstructured{Object: m}
		}
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
