package release

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// secretRequests counts a Manager's reads of the records' namespace:
// LISTs of Secrets whole (watches and metadata aside) and GETs of one
// Secret.
type secretRequests struct {
	ns          string
	lists, gets atomic.Int64
}

func (c *secretRequests) config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			prefix := "/api/v1/namespaces/" + c.ns + "/secrets"
			if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, prefix) && r.URL.Query().Get("watch") != "true" {
				// Metadata LISTs are the chunk sweep's (after a chunked
				// write or a delete), not history reads.
				if r.URL.Path == prefix && !strings.Contains(r.Header.Get("Accept"), "PartialObjectMetadata") {
					c.lists.Add(1)
				} else {
					c.gets.Add(1)
				}
			}
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// startedManager is a Manager whose record index runs (as Setup runs it)
// and has synced.
func startedManager(t *testing.T, cfg *rest.Config, ns string) *Manager {
	t.Helper()
	m, err := NewManager(cfg, ns)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = m.Start(ctx) }()
	deadline := time.Now().Add(testenv.WaitTimeout)
	for !m.records.index.informer.HasSynced() {
		if time.Now().After(deadline) {
			t.Fatalf("the record index did not sync within %s", testenv.WaitTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return m
}

// TestIntegrationHistoryByName: with its index running, a Manager reads a
// release's history by name, never with a LIST of the namespace's Secrets
// (issue 15: the API server matches every record against such a LIST's
// selector, O(N) per read), and still decides as the LIST did: right after
// its own writes (the index's informer may not have them yet), for chunked
// records, for records a previous process wrote (a restart), and after an
// uninstall deleted the records the informer may still show.
func TestIntegrationHistoryByName(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	ctx := context.Background()
	ns, apps := testenv.Namespace(t, env, "rukpak-system"), testenv.Namespace(t, env, "apps")
	reqs := &secretRequests{ns: ns}
	cfg := reqs.config(env.Config)
	m := startedManager(t, cfg, ns)

	cm := func(name string, data map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": apps},
			"data":     data,
		}}
	}
	// Hex of random bytes compresses to about half: the record of "big"
	// (four ConfigMaps of 600 KiB) is over 1 MiB gzipped, split across
	// Secrets.
	var big []*unstructured.Unstructured
	for _, k := range []string{"a", "b", "c", "d"} {
		noise := make([]byte, 300<<10)
		if _, err := rand.Read(noise); err != nil {
			t.Fatal(err)
		}
		big = append(big, cm("big-"+k, map[string]any{"noise": hex.EncodeToString(noise)}))
	}
	apply := func(m *Manager, name string, objs ...*unstructured.Unstructured) *Result {
		t.Helper()
		res, err := m.Apply(ctx, name, objs, nil)
		if err != nil {
			t.Fatalf("apply %s: %v", name, err)
		}
		return res
	}
	lists := reqs.lists.Load()

	for name, objs := range map[string][]*unstructured.Unstructured{"small": {cm("small", map[string]any{"k": "v1"})}, "big": big} {
		if res := apply(m, name, objs...); !res.Changed || res.Release.Version != 1 {
			t.Fatalf("%s: first install changed %v revision %d", name, res.Changed, res.Release.Version)
		}
		// At once, before the informer need have seen the record.
		if res := apply(m, name, objs...); res.Changed || res.Release.Version != 1 {
			t.Errorf("%s: the same objects again: changed %v revision %d, want unchanged 1", name, res.Changed, res.Release.Version)
		}
	}
	var chunks corev1.SecretList
	if err := env.Client.List(ctx, &chunks, client.InNamespace(ns), client.MatchingLabels{labelChunkRelease: "big"}); err != nil {
		t.Fatal(err)
	}
	if len(chunks.Items) < 2 {
		t.Fatalf("the big record has %d chunks; want it split", len(chunks.Items))
	}
	// An upgrade: revision 2, the first superseded.
	if res := apply(m, "small", cm("small", map[string]any{"k": "v2"})); !res.Changed || res.Release.Version != 2 {
		t.Fatalf("upgrade: changed %v revision %d", res.Changed, res.Release.Version)
	}
	if res := apply(m, "small", cm("small", map[string]any{"k": "v2"})); res.Changed || res.Release.Version != 2 {
		t.Errorf("after the upgrade: changed %v revision %d, want unchanged 2", res.Changed, res.Release.Version)
	}
	hist, err := m.History("small")
	if err != nil {
		t.Fatal(err)
	}
	status := map[int]helmrelease.Status{}
	for _, r := range hist {
		status[r.Version] = r.Info.Status
	}
	if len(status) != 2 || status[1] != helmrelease.StatusSuperseded || status[2] != helmrelease.StatusDeployed {
		t.Errorf("history %v, want 1 superseded and 2 deployed", status)
	}
	if n := reqs.lists.Load() - lists; n != 0 {
		t.Errorf("%d LISTs of Secrets once the index had synced, want 0", n)
	}

	// A new process: its index starts from the records the first wrote,
	// whose labels say what the deployed revisions hold: nothing to read.
	m2 := startedManager(t, cfg, ns)
	lists, gets := reqs.lists.Load(), reqs.gets.Load()
	if res := apply(m2, "small", cm("small", map[string]any{"k": "v2"})); res.Changed || res.Release.Version != 2 || res.ManifestSize() == 0 {
		t.Errorf("after a restart: changed %v revision %d manifest %d bytes, want unchanged 2", res.Changed, res.Release.Version, res.ManifestSize())
	}
	if res := apply(m2, "big", big...); res.Changed || res.Release.Version != 1 || res.ManifestSize() < 2<<20 {
		t.Errorf("chunked, after a restart: changed %v revision %d manifest %d bytes, want unchanged 1", res.Changed, res.Release.Version, res.ManifestSize())
	}
	if n := reqs.lists.Load() - lists; n != 0 {
		t.Errorf("%d LISTs of Secrets once the restarted index had synced, want 0", n)
	}
	if n := reqs.gets.Load() - gets; n != 0 {
		t.Errorf("%d reads of release records after a restart, want 0 (the records' labels vouch for the objects)", n)
	}
	// Other objects after a restart: the labels do not vouch for them.
	if res := apply(m2, "small", cm("small", map[string]any{"k": "v2b"})); !res.Changed || res.Release.Version != 3 {
		t.Errorf("other objects after a restart: changed %v revision %d, want an upgrade to 3", res.Changed, res.Release.Version)
	}
	if res := apply(m2, "small", cm("small", map[string]any{"k": "v2"})); !res.Changed || res.Release.Version != 4 {
		t.Errorf("the objects of revision 2 again: changed %v revision %d, want an upgrade to 4", res.Changed, res.Release.Version)
	}

	// Uninstalled, then installed again: the deleted records are no history
	// even while the informer still shows them. (The uninstall's sweep of
	// chunks lists, by its own label.)
	if _, err := m2.Uninstall(ctx, "small"); err != nil {
		t.Fatal(err)
	}
	lists = reqs.lists.Load()
	if res := apply(m2, "small", cm("small", map[string]any{"k": "v2"})); !res.Changed || res.Release.Version != 1 || res.Upgraded {
		t.Errorf("install after an uninstall: changed %v upgraded %v revision %d, want a first install", res.Changed, res.Upgraded, res.Release.Version)
	}
	if n := reqs.lists.Load() - lists; n != 0 {
		t.Errorf("%d LISTs of Secrets for an install after an uninstall, want 0", n)
	}
	if hist, err := m2.History("small"); err != nil || len(hist) != 1 || hist[0].Version != 1 {
		t.Errorf("history after the new install: %d records, %v", len(hist), err)
	}
}

// TestIntegrationCrowdedNamespaceListedOnce: once the ownership check's
// LIST found a namespace holding far more objects of a kind than a release
// asks about, the next releases there check with GETs at once (issue 15:
// the API server answered each such LIST from every object of the
// namespace), and still refuse an object that is not theirs.
func TestIntegrationCrowdedNamespaceListedOnce(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	ctx := context.Background()
	ns, crowded := testenv.Namespace(t, env, "rukpak-system"), testenv.Namespace(t, env, "crowded")
	var lists atomic.Int64
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/"+crowded+"/configmaps" && r.URL.Query().Get("watch") != "true" {
				lists.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	m, err := NewManager(cfg, ns)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: crowded, Name: fmt.Sprintf("bystander-%03d", i)}}
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: crowded, Name: "zz-foreign"}}
	if err := env.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	objs := func(names ...string) []*unstructured.Unstructured {
		var out []*unstructured.Unstructured
		for _, n := range names {
			out = append(out, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": n, "namespace": crowded},
				"data":     map[string]any{"k": "v"},
			}})
		}
		return out
	}
	names := func(prefix string) []string {
		var out []string
		for i := range 10 {
			out = append(out, fmt.Sprintf("%s-%02d", prefix, i))
		}
		return out
	}
	if _, err := m.Apply(ctx, "first", objs(names("first")...), nil); err != nil {
		t.Fatal(err)
	}
	if n := lists.Load(); n != 1 {
		t.Fatalf("%d LISTs of the crowded namespace's ConfigMaps for the first release, want 1", n)
	}
	if _, err := m.Apply(ctx, "second", objs(names("second")...), nil); err != nil {
		t.Fatal(err)
	}
	_, err = m.Apply(ctx, "third", objs(append(names("third")[:9], "zz-foreign")...), nil)
	if err == nil || !strings.Contains(err.Error(), "ConfigMap "+crowded+"/zz-foreign exists and is not managed by this release") {
		t.Fatalf("taking over a foreign object: got %v", err)
	}
	if n := lists.Load(); n != 1 {
		t.Errorf("%d LISTs of the crowded namespace's ConfigMaps for three releases, want 1 (the first's)", n)
	}
}

// TestIntegrationWrittenReleaseNeedsNoHistoryRead: an Apply that installed
// or upgraded a release knows what its records are as its writes left
// them, so the next Apply of the same objects (a BundleDeployment's first
// reconcile after its install) reads no record back, once the informer
// shows those writes; a record someone else wrote since is noticed, and
// read.
func TestIntegrationWrittenReleaseNeedsNoHistoryRead(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	ctx := context.Background()
	ns, apps := testenv.Namespace(t, env, "rukpak-system"), testenv.Namespace(t, env, "apps")
	reqs := &secretRequests{ns: ns}
	m := startedManager(t, reqs.config(env.Config), ns)

	cm := func(v string) []*unstructured.Unstructured {
		return []*unstructured.Unstructured{{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "written", "namespace": apps},
			"data":     map[string]any{"k": v},
		}}}
	}
	// shown waits until the index shows every record as the API server has
	// it: what a reconcile a moment after the write finds.
	shown := func(name string) {
		t.Helper()
		deadline := time.Now().Add(testenv.WaitTimeout)
		for {
			var list corev1.SecretList
			if err := env.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": name}); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{}
			for _, s := range list.Items {
				want[s.Name] = string(s.UID) + "@" + s.ResourceVersion
			}
			got, ok := m.records.index.versions(name)
			if ok && fmt.Sprint(got) == fmt.Sprint(want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the index shows %v, the API server %v", got, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	again := func(what string, v string, version int) {
		t.Helper()
		shown("written")
		gets := reqs.gets.Load()
		res, err := m.Apply(ctx, "written", cm(v), nil)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if res.Changed || res.Release.Version != version {
			t.Errorf("%s: changed %v revision %d, want unchanged %d", what, res.Changed, res.Release.Version, version)
		}
		if n := reqs.gets.Load() - gets; n != 0 {
			t.Errorf("%s: %d reads of release records, want none", what, n)
		}
	}

	if res, err := m.Apply(ctx, "written", cm("v1"), nil); err != nil || !res.Changed {
		t.Fatalf("install: %v", err)
	}
	// At once, most likely before the informer shows the record: read, and
	// what the install's writes left is kept for when it does.
	if res, err := m.Apply(ctx, "written", cm("v1"), nil); err != nil || res.Changed {
		t.Fatalf("right after the install: %v", err)
	}
	again("after the install", "v1", 1)
	if res, err := m.Apply(ctx, "written", cm("v2"), nil); err != nil || !res.Changed || res.Release.Version != 2 {
		t.Fatalf("upgrade: %v", err)
	}
	again("after the upgrade", "v2", 2)

	// Someone else writes a record (here: a label on the deployed one):
	// the record's own labels still say it is deployed with these objects,
	// so nothing is read.
	var rec corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: recordKey("written", 2)}, &rec); err != nil {
		t.Fatal(err)
	}
	rec.Labels["touched"] = "yes"
	if err := env.Client.Update(ctx, &rec); err != nil {
		t.Fatal(err)
	}
	again("after a foreign label", "v2", 2)
	// A write that drops what the labels vouched with (as Helm's own
	// rewrite of a record would): the next Apply reads the history again,
	// and still finds nothing to change.
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: recordKey("written", 2)}, &rec); err != nil {
		t.Fatal(err)
	}
	delete(rec.Labels, labelObjects)
	if err := env.Client.Update(ctx, &rec); err != nil {
		t.Fatal(err)
	}
	shown("written")
	gets := reqs.gets.Load()
	res, err := m.Apply(ctx, "written", cm("v2"), nil)
	if err != nil || res.Changed || res.Release.Version != 2 {
		t.Fatalf("after a foreign write: %v", err)
	}
	if reqs.gets.Load() == gets {
		t.Errorf("after a foreign write of a record: no record read, want the history read again")
	}
	again("once read again", "v2", 2)

	// An install that failed is remembered as nothing: the same objects
	// again are applied again, and fail again.
	missing := []*unstructured.Unstructured{{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "nowhere", "namespace": "no-such-namespace"},
	}}}
	for i := range 2 {
		if _, err := m.Apply(ctx, "failing", missing, nil); err == nil {
			t.Fatalf("install %d into a missing namespace succeeded", i+1)
		}
		shown("failing")
	}
}
