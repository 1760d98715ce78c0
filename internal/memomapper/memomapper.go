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

// maxMappings bounds the mappings remembered, and apart from them the
// kinds remembered missing; past it all of that kind are forgotten.
const maxMappings = 1024

// settling is how long after ForgetMissing a group's kinds are not
// remembered missing: the API server serves a new CRD's kinds a moment
// after the CRD is created or Established, and an attempt that asks in
// between must be able to ask again.
const settling = 10 * time.Second

// Mapper is a RESTMapper whose RESTMapping answers for one kind and at
// most one version are remembered for a TTL. Errors are not remembered,
// unless RememberMissing says so: a kind not found is asked again (its
// CRD may be new).
type Mapper struct {
	meta.RESTMapper
	ttl time.Duration
	now func() time.Time

	mu       sync.RWMutex
	mappings map[key]entry
	// missingTTL > 0: no-match answers are remembered in missing, except
	// for the groups in changed (ForgetMissing) until their time.
	missingTTL time.Duration
	missing    map[key]miss
	changed    map[string]time.Time
	missingOff time.Time // none remembered before it
}

// miss is a remembered no-match answer.
type miss struct {
	err     error
	expires time.Time
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

// RememberMissing makes m remember, for ttl (0: DefaultTTL), that a kind
// is not served: controller-runtime's mapper answers a kind of a group it
// does not know by reading the discovery of every group the API server
// serves and rebuilding itself, ~160 KB allocated per call with sixty
// operators' groups, and a failing install asks for its missing kind
// several times per attempt. Whoever learns that a group may be served
// now (a CRD of it created or changed) must call ForgetMissing; kinds
// served by an aggregated API server are seen up to ttl late. It returns
// m; call it before m is used.
func (m *Mapper) RememberMissing(ttl time.Duration) *Mapper {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	m.missingTTL = ttl
	m.missing = map[key]miss{}
	m.changed = map[string]time.Time{}
	return m
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
	ms := m.missing[k]
	m.mu.RUnlock()
	if ok && now.Before(e.expires) {
		mapping := e.mapping
		return &mapping, nil
	}
	if ms.err != nil && now.Before(ms.expires) {
		return nil, ms.err
	}
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil || mapping == nil {
		if m.missingTTL > 0 && meta.IsNoMatchError(err) && nameable(k) {
			m.rememberMissing(k, err, now)
		}
		return mapping, err
	}
	m.mu.Lock()
	delete(m.missing, k)
	if len(m.mappings) >= maxMappings {
		clear(m.mappings)
	}
	m.mappings[k] = entry{mapping: *mapping, expires: now.Add(m.ttl)}
	m.mu.Unlock()
	return mapping, nil
}

// rememberMissing notes that k was not found, unless its group changed
// a moment ago.
func (m *Mapper) rememberMissing(k key, err error, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.Before(m.missingOff) {
		return
	}
	if t, ok := m.changed[k.gk.Group]; ok {
		if now.Before(t) {
			return
		}
		delete(m.changed, k.gk.Group)
	}
	if len(m.missing) >= maxMappings {
		for k, ms := range m.missing {
			if !now.Before(ms.expires) {
				delete(m.missing, k)
			}
		}
	}
	if len(m.missing) >= maxMappings {
		clear(m.missing)
	}
	delete(m.mappings, k) // expired, or it would not have been asked for
	m.missing[k] = miss{err: err, expires: now.Add(m.missingTTL)}
}

// nameable says whether k could name a kind the API server serves (an API
// group is a DNS subdomain, a version and a kind at most a DNS label
// long): the kinds asked for come from bundles, and a miss remembered
// holds its names.
func nameable(k key) bool {
	const subdomain, label = 253, 63
	return len(k.gk.Group) <= subdomain && len(k.gk.Kind) <= label && len(k.version) <= label
}

// ForgetMissing forgets that kinds of groups were not found, and for a
// few seconds does not remember it again: a CRD of theirs was created or
// changed. The mapper underneath is left as it is (it asks the API server
// again for a kind it does not know).
func (m *Mapper) ForgetMissing(groups ...string) {
	if m.missingTTL <= 0 {
		return
	}
	until := m.now().Add(settling)
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.missing {
		if slices.Contains(groups, k.gk.Group) {
			delete(m.missing, k)
		}
	}
	if len(m.changed)+len(groups) > maxMappings {
		now := until.Add(-settling)
		for g, t := range m.changed {
			if !now.Before(t) {
				delete(m.changed, g)
			}
		}
	}
	if len(m.changed)+len(groups) > maxMappings {
		// More groups changing within seconds than the bound: their
		// misses are not remembered at all until it is over.
		clear(m.missing)
		m.missingOff = until
		clear(m.changed)
	}
	for _, g := range groups {
		m.changed[g] = until
	}
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
	m.ForgetMissing(groups...)
	if r, ok := m.RESTMapper.(meta.ResettableRESTMapper); ok {
		r.Reset()
	}
}

// Reset forgets every mapping, and resets the mapper underneath if it can
// be.
func (m *Mapper) Reset() {
	m.mu.Lock()
	clear(m.mappings)
	clear(m.missing)
	m.mu.Unlock()
	if r, ok := m.RESTMapper.(meta.ResettableRESTMapper); ok {
		r.Reset()
	}
}
