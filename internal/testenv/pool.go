package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Pooled API servers: a test that needs a whole API server to itself (its
// own cluster-scoped objects, a provisioner watching everything) but not a
// fresh process takes one from the pool of its test binary and gives it
// back when it ends, emptied of everything it created. Starting an envtest
// API server costs ~5 s of CPU, most of what a short integration test
// costs; emptying one costs a few dozen requests. Servers are started as
// tests need them, so there are as many as tests run at once (-parallel).
//
// Emptying is generic: every object that was not there when the server had
// started (by UID) is deleted, finalizers removed first (no controller runs
// here to remove them), and namespaces finalized once their contents are
// gone (envtest runs no namespace controller). A custom resource definition
// keeps its finalizer: the API server removes the resources it serves
// before it goes, so a later CRD of the same name finds none of them. A
// server that cannot be emptied, or whose starting objects (namespaces,
// CRDs) a test changed, is stopped instead of reused.

// resetTimeout bounds the emptying of a server; past it the server is
// stopped and the next test starts a fresh one.
const resetTimeout = 2 * time.Minute

// pooledServer is one API server of the pool and what it held at start.
type pooledServer struct {
	env *Env
	// quiet is env's config without the warnings of deprecated kinds
	// (v1 Endpoints) that listing everything would print.
	quiet *rest.Config
	// baseline: UIDs of the objects present once it had started.
	baseline map[types.UID]bool
	// guarded: resource versions of the starting objects a test must not
	// change (namespaces and CRDs), by UID.
	guarded map[types.UID]string
}

var pool struct {
	mu      sync.Mutex
	idle    []*pooledServer
	started int
	reused  int
	resets  time.Duration // spent emptying servers
	stopped []string      // why servers were stopped instead of reused
}

// Pooled returns an API server from this test binary's pool (started when
// none is free), with the project's CRDs installed and nothing else a test
// created, and gives it back, emptied, when tb ends. The test has it to
// itself meanwhile. Its Client is new, so no discovery cached by an
// earlier test's client is used. The package's TestMain must run its tests
// with RunShared, which stops the pool's servers.
func Pooled(tb testing.TB) *Env {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs a kube-apiserver: skipped in -short mode")
	}
	shared.mu.Lock()
	inMain := shared.inMain
	shared.mu.Unlock()
	if !inMain {
		tb.Fatal("testenv.Pooled: the package's TestMain must run its tests with testenv.RunShared, which stops the pooled API servers")
	}
	s, err := takeServer(AssetsDir(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { giveBack(tb, s) })
	cfg := rest.CopyConfig(s.env.Config)
	c, err := client.New(cfg, client.Options{Scheme: s.env.Env.Scheme})
	if err != nil {
		tb.Fatalf("creating a client of a pooled API server: %v", err)
	}
	return &Env{Config: cfg, Client: c, Env: s.env.Env}
}

func takeServer(assets string) (*pooledServer, error) {
	pool.mu.Lock()
	if n := len(pool.idle); n > 0 {
		s := pool.idle[n-1]
		pool.idle = pool.idle[:n-1]
		pool.reused++
		pool.mu.Unlock()
		return s, nil
	}
	pool.started++
	pool.mu.Unlock()
	env, err := start(assets)
	if err != nil {
		return nil, err
	}
	quiet := rest.CopyConfig(env.Config)
	quiet.WarningHandler = rest.NoWarnings{}
	s := &pooledServer{env: env, quiet: quiet, baseline: map[types.UID]bool{}, guarded: map[types.UID]string{}}
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	objs, err := s.objects(ctx)
	for _, o := range objs {
		s.baseline[o.UID] = true
		if guardedResource(o.r.gvr) {
			s.guarded[o.UID] = o.ResourceVersion
		}
	}
	if err != nil {
		_ = env.Env.Stop()
		return nil, fmt.Errorf("listing a new API server's objects: %w", err)
	}
	return s, nil
}

// giveBack empties s and returns it to the pool, or stops it.
func giveBack(tb testing.TB, s *pooledServer) {
	ctx, cancel := context.WithTimeout(context.Background(), resetTimeout)
	defer cancel()
	start := time.Now()
	err := s.reset(ctx)
	took := time.Since(start)
	if os.Getenv("RUKPAK_TEST_POOL_STATS") != "" {
		tb.Logf("emptying the pooled API server took %s", took.Round(time.Millisecond))
	}
	pool.mu.Lock()
	pool.resets += took
	pool.mu.Unlock()
	if err != nil {
		tb.Logf("stopping a pooled API server instead of reusing it: %v", err)
		pool.mu.Lock()
		pool.stopped = append(pool.stopped, err.Error())
		pool.mu.Unlock()
		if err := s.env.Env.Stop(); err != nil {
			tb.Logf("stopping envtest: %v", err)
		}
		return
	}
	pool.mu.Lock()
	pool.idle = append(pool.idle, s)
	pool.mu.Unlock()
}

// stopPool stops the idle servers (RunShared, after the tests) and reports
// what the pool did when asked (RUKPAK_TEST_POOL_STATS).
func stopPool() {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	for _, s := range pool.idle {
		if err := s.env.Env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping a pooled envtest: %v\n", err)
		}
	}
	pool.idle = nil
	if os.Getenv("RUKPAK_TEST_POOL_STATS") != "" && pool.started > 0 {
		fmt.Fprintf(os.Stderr, "testenv pool: %d API servers started, %d reused (%s emptying them), %d stopped instead of reused\n",
			pool.started, pool.reused, pool.resets.Round(time.Millisecond), len(pool.stopped))
		for _, why := range pool.stopped {
			fmt.Fprintf(os.Stderr, "  %s\n", why)
		}
	}
}

// guardedResource: starting objects of these a test must leave as they
// were. Others (leases the API server renews, its own Service and
// endpoints) change by themselves.
func guardedResource(gvr schema.GroupVersionResource) bool {
	return gvr.Group == "" && gvr.Resource == "namespaces" ||
		gvr.Group == "apiextensions.k8s.io" && gvr.Resource == "customresourcedefinitions"
}

// resource is a listable, deletable kind the server serves.
type resource struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}

// resources lists what the server serves now. A group whose discovery
// fails (an aggregated API whose backend a test stopped) is left out: its
// APIService object is deleted first, which removes the group.
func (s *pooledServer) resources() ([]resource, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(s.quiet)
	if err != nil {
		return nil, err
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	var out []resource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return nil, err
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "delete") {
				continue
			}
			out = append(out, resource{gvr: gv.WithResource(r.Name), namespaced: r.Namespaced})
		}
	}
	return out, nil
}

// object is an object of a resource, as its metadata.
type object struct {
	r resource
	metav1.PartialObjectMetadata
}

// objects lists every object of every resource the server serves. The
// lists are read a few at a time: a server serves ~50 kinds.
func (s *pooledServer) objects(ctx context.Context) ([]object, error) {
	rs, err := s.resources()
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfig(s.quiet)
	if err != nil {
		return nil, err
	}
	items := make([][]metav1.PartialObjectMetadata, len(rs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, r := range rs {
		g.Go(func() error {
			list, err := md.Resource(r.gvr).List(gctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
				return nil // removed meanwhile (a CRD being deleted)
			}
			if err != nil {
				return fmt.Errorf("listing %s: %w", r.gvr, err)
			}
			items[i] = list.Items
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []object
	for i, r := range rs {
		for _, o := range items[i] {
			out = append(out, object{r: r, PartialObjectMetadata: o})
		}
	}
	return out, nil
}

// reset deletes every object created since s started, and checks that the
// starting objects a test must leave alone are unchanged.
func (s *pooledServer) reset(ctx context.Context) error {
	md, err := metadata.NewForConfig(s.quiet)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(s.quiet)
	if err != nil {
		return err
	}
	// Webhook configurations first, then API services: one that points at
	// a server the test stopped would refuse or fail the deletes after it.
	// CRDs after the resources they serve: the API server's cleanup of a
	// deleted CRD that finds a resource still there (a finalizer not yet
	// removed) looks again only after seconds. Namespaces last.
	tier := func(r resource) int {
		switch {
		case r.gvr.Group == "admissionregistration.k8s.io":
			return 0
		case r.gvr.Group == "apiregistration.k8s.io":
			return 1
		case r.gvr.Group == "apiextensions.k8s.io":
			return 3
		case r.gvr.Group == "" && r.gvr.Resource == "namespaces":
			return 4
		}
		return 2
	}
	zero := int64(0)
	background := metav1.DeletePropagationBackground
	// del deletes o. Its errors are retried on the next pass: a webhook
	// just deleted may still be called for a moment.
	del := func(ctx context.Context, r resource, o metav1.PartialObjectMetadata) error {
		ri := md.Resource(r.gvr).Namespace(o.Namespace)
		if len(o.Finalizers) > 0 && r.gvr.Resource != "customresourcedefinitions" {
			_, err := ri.Patch(ctx, o.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("removing the finalizers of %s %s/%s: %w", r.gvr.Resource, o.Namespace, o.Name, err)
			}
		}
		if o.DeletionTimestamp != nil {
			return nil
		}
		err := ri.Delete(ctx, o.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, PropagationPolicy: &background})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s/%s: %w", r.gvr.Resource, o.Namespace, o.Name, err)
		}
		return nil
	}
	var left []string
	for pass := 0; ; pass++ {
		left = left[:0]
		var changed, namespaces []string
		var failed []error
		inNamespaces := 0
		objs, err := s.objects(ctx)
		if err != nil {
			return err
		}
		slices.SortStableFunc(objs, func(a, b object) int { return tier(a.r) - tier(b.r) })
		for _, o := range objs {
			r := o.r
			if s.baseline[o.UID] || o.Labels["kube-aggregator.kubernetes.io/automanaged"] != "" {
				// The API server's own API services follow their groups
				// (a CRD's goes with the CRD).
				if rv, ok := s.guarded[o.UID]; ok && rv != o.ResourceVersion {
					changed = append(changed, fmt.Sprintf("%s %s", r.gvr.Resource, o.Name))
				}
				continue
			}
			left = append(left, fmt.Sprintf("%s %s/%s", r.gvr.Resource, o.Namespace, o.Name))
			if r.gvr.Group == "" && r.gvr.Resource == "namespaces" {
				namespaces = append(namespaces, o.Name)
			} else if r.namespaced {
				inNamespaces++
			}
			if err := del(ctx, r, o.PartialObjectMetadata); err != nil {
				failed = append(failed, err)
			}
		}
		if len(changed) > 0 {
			return fmt.Errorf("a test changed objects the server started with: %s", strings.Join(changed, ", "))
		}
		if os.Getenv("RUKPAK_TEST_POOL_DEBUG") != "" {
			fmt.Fprintf(os.Stderr, "DEBUG pass %d at %s: left %v failed %v\n", pass, time.Now().Format("05.000"), left, failed)
		}
		if len(left) == 0 {
			return nil
		}
		// A namespace goes once its contents are gone and its finalizer
		// is removed, which the namespace controller would do. Finalized
		// any earlier, objects left in it would stay in storage and show
		// up again in a namespace of the same name.
		for _, name := range namespaces {
			if inNamespaces > 0 {
				break
			}
			ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return err
			}
			if len(ns.Spec.Finalizers) == 0 {
				continue
			}
			ns.Spec.Finalizers = nil
			if _, err := cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("finalizing namespace %s: %w", name, err)
			}
		}
		if pass > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w: still there: %s (%w)", ctx.Err(), strings.Join(left, ", "), errors.Join(failed...))
			case <-time.After(PollPause(time.Duration(pass) * 100 * time.Millisecond)):
			}
		}
	}
}
