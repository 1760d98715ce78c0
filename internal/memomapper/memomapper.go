// Package memomapper remembers a RESTMapper's mappings for a short while.
//
// controller-runtime's dynamic RESTMapper answers every RESTMapping by
// asking the mapper of each API group it knows in turn, allocating two
// error values per group and call: with the thirty-odd groups of a
// cluster that is ~12 KB for every object applied or read, a twentieth of
// all that 10,000 installs of small bundles allocated. The client calls it
// once per request, for the same few kinds again and again.
package memomapper

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DefaultTTL is how long a mapping is remembered. The mapper underneath
// keeps a group's mappings until a kind or version of that group is not
// found, so a kind whose CRD was deleted and created again with another
// scope is mapped anew at most this much later than it would be without
// the memo.
const DefaultTTL = 30 * time.Second

// maxMappings bounds the mappings remembered (only found ones are, so
// only kinds the API server serves); past it they are all forgotten.
const maxMappings = 1024

// Mapper is a RESTMapper whose RESTMapping answers for one kind and at
// most one version are remembered for a TTL. Errors are not remembered:
// a kind not found is asked again (its CRD may be new).
type Mapper struct {
	meta.RESTMapper
	ttl time.Duration
	now func() time.Time

	mu       sync.RWMutex
	mappings map[key]entry
}

type key struct {
	gk      schema.GroupKind
	version string
}

type entry struct {
	mapping meta.RESTMapping
	expires time.Time
}

var _ meta.ResettableRESTMapper = (*Mapper)(nil)

// New remembers mapper's mappings for ttl (0: DefaultTTL).
func New(mapper meta.RESTMapper, ttl time.Duration) *Mapper {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Mapper{RESTMapper: mapper, ttl: ttl, now: time.Now, mappings: map[key]entry{}}
}

// Remembering is mapper if it remembers already, else New(mapper, 0): a
// mapper remembered twice could answer twice the TTL late.
func Remembering(mapper meta.RESTMapper) *Mapper {
	if m, ok := mapper.(*Mapper); ok {
		return m
	}
	return New(mapper, 0)
}

// RESTMapping is the mapper's, remembered. Each caller gets its own copy.
func (m *Mapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if len(versions) > 1 {
		return m.RESTMapper.RESTMapping(gk, versions...)
	}
	k := key{gk: gk}
	if len(versions) == 1 {
		k.version = versions[0]
	}
	now := m.now()
	m.mu.RLock()
	e, ok := m.mappings[k]
	m.mu.RUnlock()
	if ok && now.Before(e.expires) {
		mapping := e.mapping
		return &mapping, nil
	}
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil || mapping == nil {
		return mapping, err
	}
	m.mu.Lock()
	if len(m.mappings) >= maxMappings {
		clear(m.mappings)
	}
	m.mappings[k] = entry{mapping: *mapping, expires: now.Add(m.ttl)}
	m.mu.Unlock()
	return mapping, nil
}

// Forget forgets the mappings of the kinds of groups, and resets the
// mapper underneath if it can be. Kinds of other groups stay remembered:
// a bundle's new CRDs change the mappings of their own groups only, and
// forgetting all of them on every install of a fleet had every apply ask
// the mapper underneath again.
func (m *Mapper) Forget(groups ...string) {
	m.mu.Lock()
	for k := range m.mappings {
		if slices.Contains(groups, k.gk.Group) {
			delete(m.mappings, k)
		}
	}
	m.mu.Unlock()
	if r, ok := m.RESTMapper.(meta.ResettableRESTMapper); ok {
		r.Reset()
	}
}

// Reset forgets every mapping, and resets the mapper underneath if it can
// be.
func (m *Mapper) Reset() {
	m.mu.Lock()
	clear(m.mappings)
	m.mu.Unlock()
	if r, ok := m.RESTMapper.(meta.ResettableRESTMapper); ok {
		r.Reset()
	}
}
