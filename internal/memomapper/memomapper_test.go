package memomapper

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// counting is a RESTMapper that counts what it is asked and answers from
// its own DefaultRESTMapper.
type counting struct {
	*meta.DefaultRESTMapper
	asked int
	reset int
}

func (c *counting) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.asked++
	return c.DefaultRESTMapper.RESTMapping(gk, versions...)
}

func (c *counting) Reset() { c.reset++ }

func TestMapper(t *testing.T) {
	deployments := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	widgets := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	under := &counting{DefaultRESTMapper: meta.NewDefaultRESTMapper(nil)}
	under.Add(deployments, meta.RESTScopeNamespace)
	m := New(under, time.Minute)
	clock := time.Unix(1000, 0)
	m.now = func() time.Time { return clock }

	ask := func(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
		t.Helper()
		return m.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	first, err := ask(deployments)
	if err != nil || first.Resource.Resource != "deployments" || first.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Fatalf("first mapping: %+v, %v", first, err)
	}
	first.Resource.Resource = "changed by a caller"
	again, err := ask(deployments)
	if err != nil || again.Resource.Resource != "deployments" {
		t.Fatalf("second mapping: %+v, %v (a caller's change reached the memo)", again, err)
	}
	if under.asked != 1 {
		t.Errorf("the mapper underneath asked %d times for one kind within the TTL, want 1", under.asked)
	}

	// Not found: asked every time, until the kind exists.
	for range 2 {
		if _, err := ask(widgets); !meta.IsNoMatchError(err) {
			t.Fatalf("unknown kind: %v, want a no-match error", err)
		}
	}
	under.Add(widgets, meta.RESTScopeRoot)
	if w, err := ask(widgets); err != nil || w.Scope.Name() != meta.RESTScopeNameRoot {
		t.Fatalf("a kind added after a miss: %+v, %v", w, err)
	}
	if under.asked != 4 {
		t.Errorf("the mapper underneath asked %d times, want 4 (misses are not remembered)", under.asked)
	}

	// Past the TTL, asked again.
	clock = clock.Add(time.Minute)
	if _, err := ask(deployments); err != nil || under.asked != 5 {
		t.Errorf("after the TTL: %v, asked %d times, want 5", err, under.asked)
	}
	// Several versions: not remembered.
	for range 2 {
		if _, err := m.RESTMapping(deployments.GroupKind(), "v1", "v1beta1"); err != nil {
			t.Fatal(err)
		}
	}
	if under.asked != 7 {
		t.Errorf("asked %d times, want 7 (several versions pass through)", under.asked)
	}
	// Forget forgets the groups named only, and resets the mapper
	// underneath.
	under.Add(widgets, meta.RESTScopeNamespace)
	if _, err := ask(widgets); err != nil || under.asked != 8 {
		t.Fatalf("widgets: %v, asked %d times, want 8", err, under.asked)
	}
	m.Forget(widgets.Group)
	if _, err := ask(deployments); err != nil || under.asked != 8 || under.reset != 1 {
		t.Errorf("after forgetting another group: %v, asked %d times, reset %d; want 8, 1", err, under.asked, under.reset)
	}
	if _, err := ask(widgets); err != nil || under.asked != 9 {
		t.Errorf("after forgetting its group: %v, asked %d times, want 9", err, under.asked)
	}
	// Reset forgets all, and resets the mapper underneath.
	m.Reset()
	if _, err := ask(deployments); err != nil || under.asked != 10 || under.reset != 2 {
		t.Errorf("after Reset: %v, asked %d times, reset %d; want 10, 2", err, under.asked, under.reset)
	}
}

// TestMapperBound: the memo holds at most maxMappings.
func TestMapperBound(t *testing.T) {
	under := meta.NewDefaultRESTMapper(nil)
	for i := range maxMappings + 10 {
		under.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: kindName(i)}, meta.RESTScopeNamespace)
	}
	m := New(under, 0)
	for i := range maxMappings + 10 {
		if _, err := m.RESTMapping(schema.GroupKind{Group: "example.com", Kind: kindName(i)}, "v1"); err != nil {
			t.Fatal(err)
		}
		if len(m.mappings) > maxMappings {
			t.Fatalf("%d mappings remembered, bound %d", len(m.mappings), maxMappings)
		}
	}
}

func kindName(i int) string {
	b := []byte("Kind")
	for i > 0 || len(b) == 4 {
		b = append(b, byte('a'+i%26))
		i /= 26
	}
	return string(b)
}

// A mapper that remembers already is not wrapped again.
func TestRemembering(t *testing.T) {
	under := &counting{DefaultRESTMapper: meta.NewDefaultRESTMapper(nil)}
	m := Remembering(under)
	if m.RESTMapper != under || m.ttl != DefaultTTL {
		t.Fatalf("Remembering(a plain mapper) = %+v", m)
	}
	if again := Remembering(m); again != m {
		t.Errorf("Remembering(a remembering mapper) wrapped it again")
	}
}

// TestMapperRemembersMissing: with RememberMissing, a kind not served is
// asked once per TTL, until ForgetMissing (a CRD of its group changed);
// for a while after that its misses are not remembered, so an attempt
// that asks before the API server serves the new kind can ask again.
func TestMapperRemembersMissing(t *testing.T) {
	widgets := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	gadgets := schema.GroupVersionKind{Group: "other.example.com", Version: "v1", Kind: "Gadget"}
	under := &counting{DefaultRESTMapper: meta.NewDefaultRESTMapper(nil)}
	m := New(under, time.Minute).RememberMissing(time.Minute)
	clock := time.Unix(1000, 0)
	m.now = func() time.Time { return clock }
	ask := func(gvk schema.GroupVersionKind) error {
		t.Helper()
		_, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
		return err
	}
	miss := func(gvk schema.GroupVersionKind, asked int, why string) {
		t.Helper()
		if err := ask(gvk); !meta.IsNoMatchError(err) {
			t.Fatalf("%s: %v, want a no-match error", why, err)
		}
		if under.asked != asked {
			t.Fatalf("%s: the mapper underneath asked %d times, want %d", why, under.asked, asked)
		}
	}
	found := func(gvk schema.GroupVersionKind, asked int, why string) {
		t.Helper()
		if err := ask(gvk); err != nil {
			t.Fatalf("%s: %v", why, err)
		}
		if under.asked != asked {
			t.Fatalf("%s: the mapper underneath asked %d times, want %d", why, under.asked, asked)
		}
	}

	miss(widgets, 1, "first miss")
	miss(widgets, 1, "a miss within the TTL")
	miss(gadgets, 2, "another group's miss")
	under.Add(widgets, meta.RESTScopeNamespace)
	miss(widgets, 2, "served, but nobody said so yet")

	// A CRD of the group changed: asked again, and misses are not
	// remembered while it settles.
	m.ForgetMissing(widgets.Group)
	miss(gadgets, 2, "another group is still remembered")
	found(widgets, 3, "after ForgetMissing")
	found(widgets, 3, "the mapping is remembered")

	m.ForgetMissing(gadgets.Group)
	miss(gadgets, 4, "settling")
	miss(gadgets, 5, "settling, asked again")
	clock = clock.Add(settling)
	miss(gadgets, 6, "settled")
	miss(gadgets, 6, "remembered again once settled")

	// Past the TTL: asked again.
	clock = clock.Add(time.Minute)
	miss(gadgets, 7, "after the TTL")

	// Forget (the wait for a bundle's CRDs) and Reset forget misses too.
	m.Forget(gadgets.Group)
	miss(gadgets, 8, "after Forget")
	clock = clock.Add(settling)
	miss(gadgets, 9, "asked once settled")
	miss(gadgets, 9, "and remembered")
	m.Reset()
	miss(gadgets, 10, "after Reset")

	// Errors other than no-match are never remembered.
	failing := New(erring{}, time.Minute).RememberMissing(time.Minute)
	for range 2 {
		if _, err := failing.RESTMapping(widgets.GroupKind(), widgets.Version); err == nil || meta.IsNoMatchError(err) {
			t.Fatalf("a failing mapper: %v", err)
		}
	}
	if len(failing.missing) != 0 {
		t.Errorf("%d errors remembered, want none", len(failing.missing))
	}

	// Without RememberMissing nothing changes.
	plain := New(under, time.Minute)
	plain.ForgetMissing(gadgets.Group)
	asked := under.asked
	for range 2 {
		if _, err := plain.RESTMapping(gadgets.GroupKind(), gadgets.Version); !meta.IsNoMatchError(err) {
			t.Fatal(err)
		}
	}
	if under.asked != asked+2 {
		t.Errorf("without RememberMissing: asked %d times, want 2", under.asked-asked)
	}
}

// TestMapperMissingBound: the misses and the changed groups stay within
// maxMappings, however many groups a cluster's CRDs name.
func TestMapperMissingBound(t *testing.T) {
	m := New(meta.NewDefaultRESTMapper(nil), 0).RememberMissing(0)
	clock := time.Unix(1000, 0)
	m.now = func() time.Time { return clock }
	for i := range 3 * maxMappings {
		g := kindName(i) + ".example.com"
		if _, err := m.RESTMapping(schema.GroupKind{Group: g, Kind: "Widget"}, "v1"); !meta.IsNoMatchError(err) {
			t.Fatal(err)
		}
		if i%2 == 0 {
			m.ForgetMissing(g)
		}
		if len(m.missing) > maxMappings || len(m.changed) > maxMappings {
			t.Fatalf("%d misses, %d changed groups remembered, bound %d", len(m.missing), len(m.changed), maxMappings)
		}
	}
}

// erring fails every mapping with an error that is not a no-match.
type erring struct{ meta.RESTMapper }

func (erring) RESTMapping(schema.GroupKind, ...string) (*meta.RESTMapping, error) {
	return nil, errors.New("discovery failed")
}

// TestMapperMissingNames: a miss of a kind no API server could serve (a
// name longer than the API allows, from a bundle) is not remembered, so
// the memo never holds such names; expired misses make room before the
// memo is emptied.
func TestMapperMissingNames(t *testing.T) {
	under := &counting{DefaultRESTMapper: meta.NewDefaultRESTMapper(nil)}
	m := New(under, 0).RememberMissing(0)
	clock := time.Unix(1000, 0)
	m.now = func() time.Time { return clock }
	long := strings.Repeat("K", 1<<20)
	for _, gk := range []schema.GroupKind{{Group: "apps", Kind: long}, {Group: long, Kind: "Widget"}} {
		for range 2 {
			if _, err := m.RESTMapping(gk, "v1"); !meta.IsNoMatchError(err) {
				t.Fatal(err)
			}
		}
	}
	if _, err := m.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Widget"}, long); !meta.IsNoMatchError(err) {
		t.Fatal(err)
	}
	if len(m.missing) != 0 || under.asked != 5 {
		t.Errorf("%d misses remembered, the mapper underneath asked %d times; want none remembered, 5", len(m.missing), under.asked)
	}

	// At the bound, expired misses go first.
	for i := range maxMappings - 1 {
		if _, err := m.RESTMapping(schema.GroupKind{Group: "example.com", Kind: kindName(i)}, "v1"); !meta.IsNoMatchError(err) {
			t.Fatal(err)
		}
	}
	clock = clock.Add(DefaultTTL)
	fresh := schema.GroupKind{Group: "example.com", Kind: "Fresh"}
	for _, gk := range []schema.GroupKind{fresh, {Group: "example.com", Kind: "Fresher"}} {
		if _, err := m.RESTMapping(gk, "v1"); !meta.IsNoMatchError(err) {
			t.Fatal(err)
		}
	}
	if len(m.missing) != 2 {
		t.Errorf("%d misses remembered, want the 2 not expired", len(m.missing))
	}
}

// TestMapperMissingAfterMapped: a kind mapped once and then no longer
// served (its CRD deleted) is remembered missing once its mapping has
// expired.
func TestMapperMissingAfterMapped(t *testing.T) {
	widgets := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	under := &counting{DefaultRESTMapper: meta.NewDefaultRESTMapper(nil)}
	under.Add(widgets, meta.RESTScopeNamespace)
	m := New(under, time.Minute).RememberMissing(time.Minute)
	clock := time.Unix(1000, 0)
	m.now = func() time.Time { return clock }
	if _, err := m.RESTMapping(widgets.GroupKind(), widgets.Version); err != nil {
		t.Fatal(err)
	}
	under.DefaultRESTMapper = meta.NewDefaultRESTMapper(nil) // the CRD is gone
	clock = clock.Add(time.Minute)
	for range 2 {
		if _, err := m.RESTMapping(widgets.GroupKind(), widgets.Version); !meta.IsNoMatchError(err) {
			t.Fatalf("after the CRD is gone: %v, want a no-match error", err)
		}
	}
	if under.asked != 2 {
		t.Errorf("the mapper underneath asked %d times, want 2 (the miss remembered)", under.asked)
	}
}
