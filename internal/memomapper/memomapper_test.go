package memomapper

import (
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
