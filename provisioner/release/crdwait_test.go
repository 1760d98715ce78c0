package release

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rukpak-dev/rukpak/internal/leanclient"
)

// crdServer serves the CRD "widgets.example.com" at a resourceVersion and
// Established or not, counting its reads.
type crdServer struct {
	mu          sync.Mutex
	rv          string
	established bool
	reads       int
}

func (s *crdServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.URL.Path != "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com" {
		http.NotFound(w, r)
		return
	}
	s.reads++
	status := "False"
	if s.established {
		status = "True"
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com","resourceVersion":%q,"uid":"u","generation":1},"spec":{},"status":{"conditions":[{"type":"NamesAccepted","status":"True"},{"type":"Established","status":%q}]}}`, s.rv, status)
}

func (s *crdServer) set(rv string, established bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv, s.established = rv, established
}

func (s *crdServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// cachedCRD is a cache of CRDs' metadata holding one at rv ("": none).
type cachedCRD struct{ rv string }

func (c cachedCRD) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if c.rv == "" {
		return apierrors.NewNotFound(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, key.Name)
	}
	obj.(*metav1.PartialObjectMetadata).Name = key.Name
	obj.(*metav1.PartialObjectMetadata).ResourceVersion = c.rv
	return nil
}

func (c cachedCRD) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return fmt.Errorf("not listed")
}

// seenAt is the informer's event of the CRD at rv.
func seenAt(rv string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", ResourceVersion: rv}}
}

// eventually waits for cond, for at most a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func crdWaiter(t *testing.T, srv *crdServer, cache client.Reader) *Manager {
	t.Helper()
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	cfg := &rest.Config{Host: hs.URL}
	own, err := leanclient.New(fake.NewClientBuilder().Build(), cfg, hs.Client())
	if err != nil {
		t.Fatal(err)
	}
	return &Manager{own: own, crdVersions: &crdVersions{cache: cache, quiet: time.Hour}}
}

// With a cache of installed CRDs, a CRD being established is read only
// when the cache has seen a version not read yet: never while it holds the
// apply's, once per status update after.
func TestUntilEstablishedReadsOnChange(t *testing.T) {
	srv := &crdServer{rv: "2"}
	m := crdWaiter(t, srv, cachedCRD{rv: "1"})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	type result struct {
		seen *crdSeen
		err  error
	}
	done := make(chan result, 1)
	go func() {
		seen, err := m.untilEstablished(ctx, "widgets.example.com", "1", true)
		done <- result{seen, err}
	}()
	v := m.crdVersions
	eventually(t, "the CRD to be followed", func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		return v.awaited["widgets.example.com"] != nil
	})
	// The apply's own version again: nothing to read.
	v.observe(seenAt("1"))
	// Names accepted: read once, not Established yet.
	v.observe(seenAt("2"))
	eventually(t, "a read after the first change", func() bool { return srv.count() == 1 })
	v.observe(seenAt("2"))
	// Established.
	srv.set("3", true)
	v.observe(seenAt("3"))
	r := <-done
	if r.err != nil || r.seen == nil || r.seen.ResourceVersion != "3" {
		t.Fatalf("untilEstablished = %+v, %v", r.seen, r.err)
	}
	if n := srv.count(); n != 2 {
		t.Errorf("read %d times for two status updates, want 2", n)
	}
	if len(v.awaited) != 0 {
		t.Errorf("still followed after the wait: %v", v.awaited)
	}
}

// A CRD the cache has not seen (not labelled as installed, or not yet) is
// read on a timer all the same.
func TestUntilEstablishedWithoutTheCRDCached(t *testing.T) {
	srv := &crdServer{rv: "2", established: true}
	m := crdWaiter(t, srv, cachedCRD{})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	seen, err := m.untilEstablished(ctx, "widgets.example.com", "1", true)
	if err != nil || seen == nil || seen.ResourceVersion != "2" || srv.count() != 1 {
		t.Fatalf("untilEstablished = %+v, %v after %d reads", seen, err, srv.count())
	}
}

// A CRD the apply did not create (unchanged, or updated) is read at once:
// it may see no new version at all, and is most likely Established.
// (Waiting for the cache, here for an hour, would fail the test by its
// deadline.)
func TestUntilEstablishedReadsAnExistingCRDAtOnce(t *testing.T) {
	srv := &crdServer{rv: "5", established: true}
	m := crdWaiter(t, srv, cachedCRD{rv: "5"})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	seen, err := m.untilEstablished(ctx, "widgets.example.com", "5", false)
	if err != nil || seen == nil || seen.ResourceVersion != "5" || srv.count() != 1 {
		t.Fatalf("untilEstablished = %+v, %v after %d reads", seen, err, srv.count())
	}
	// Not Established yet after all: then it waits for a change.
	srv = &crdServer{rv: "6"}
	m = crdWaiter(t, srv, cachedCRD{rv: "6"})
	done := make(chan error, 1)
	go func() {
		_, err := m.untilEstablished(ctx, "widgets.example.com", "6", false)
		done <- err
	}()
	eventually(t, "the first read", func() bool { return srv.count() == 1 })
	srv.set("7", true)
	m.crdVersions.observe(seenAt("7"))
	if err := <-done; err != nil || srv.count() != 2 {
		t.Fatalf("untilEstablished: %v after %d reads, want 2", err, srv.count())
	}
}
