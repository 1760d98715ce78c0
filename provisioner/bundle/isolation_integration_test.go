package bundle_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testgit"
	"github.com/rukpak-dev/rukpak/internal/testnet"
	"github.com/rukpak-dev/rukpak/provisioner/bundle"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/storage"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/sources"
)

const namespace = "rukpak-system"

// passThrough stores content as it is unpacked: these tests are about
// fetching, not formats.
var passThrough = bundle.HandlerFunc(func(_ context.Context, fsys fs.FS, _ *rukpakv1alpha1.Bundle) (fs.FS, error) {
	return fsys, nil
})

type env struct {
	t   *testing.T
	env *testenv.Env
	c   client.Client
}

func newEnv(t *testing.T) *env {
	if os.Getenv("RUKPAK_TEST_LOG") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	e := testenv.Pooled(t)
	if err := e.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, env: e, c: e.Client}
}

// start runs a manager with the Bundle reconciler of class (storing into
// leader) and, when replica is set, a ReplicaCache storing into replica.
func (e *env) start(class string, timeout time.Duration, leader, replica *storage.LocalDirectory) {
	e.t.Helper()
	mgr, err := ctrl.NewManager(e.env.Config, manager.Options{
		Scheme:                 e.env.Env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	unpacker := sources.New(unpack.Config{Reader: mgr.GetAPIReader(), Namespace: namespace, BaseDir: e.t.TempDir()})
	r := &bundle.Reconciler{Client: mgr.GetClient(), Class: class, Unpacker: unpacker, Storage: leader, Handler: passThrough, FetchTimeout: timeout}
	if err := r.SetupWithManager(mgr); err != nil {
		e.t.Fatal(err)
	}
	if replica != nil {
		rr := &bundle.Reconciler{Client: mgr.GetClient(), Class: class, Unpacker: unpacker, Storage: replica, Handler: passThrough, FetchTimeout: timeout}
		if err := (&bundle.ReplicaCache{Reconciler: rr}).SetupWithManager(mgr); err != nil {
			e.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Logf("manager stopped: %v", err)
		}
	})
}

func (e *env) create(b *rukpakv1alpha1.Bundle) {
	e.t.Helper()
	if err := e.c.Create(context.Background(), b); err != nil {
		e.t.Fatalf("creating bundle %s: %v", b.Name, err)
	}
}

func (e *env) get(name string) *rukpakv1alpha1.Bundle {
	e.t.Helper()
	b := &rukpakv1alpha1.Bundle{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Name: name}, b); err != nil {
		e.t.Fatalf("getting bundle %s: %v", name, err)
	}
	return b
}

// patience is how long these tests wait for a condition: minutes, for a busy
// machine, yet well under the 10-minute fetch timeout of the stuck sources,
// so a good Bundle that waited for a stuck one still fails the wait.
const patience = 4 * time.Minute

func waitFor(t *testing.T, timeout time.Duration, what string, f func() error) time.Duration {
	t.Helper()
	start := time.Now()
	var err error
	for time.Since(start) < timeout {
		if err = f(); err == nil {
			return time.Since(start)
		}
		testenv.Poll(start)
	}
	t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
	return 0
}

func newBundle(name, class string, src rukpakv1alpha1.BundleSource) *rukpakv1alpha1.Bundle {
	return &rukpakv1alpha1.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       rukpakv1alpha1.BundleSpec{ProvisionerClassName: class, Source: src},
	}
}

func stuckSources(addr string) map[string]rukpakv1alpha1.BundleSource {
	return map[string]rukpakv1alpha1.BundleSource{
		"git": {Type: rukpakv1alpha1.SourceTypeGit, Git: &rukpakv1alpha1.GitSource{
			Repository: "http://" + addr + "/repo", Ref: rukpakv1alpha1.GitRef{Branch: "main"}}},
		"image": {Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: addr + "/bundle:v1"}},
		"http":  {Type: rukpakv1alpha1.SourceTypeHTTP, HTTP: &rukpakv1alpha1.HTTPSource{URL: "http://" + addr + "/bundle.tgz"}},
	}
}

func goodConfigMapBundle(t *testing.T, e *env, name, class string) *rukpakv1alpha1.Bundle {
	t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Immutable:  ptr.To(true),
		Data:       map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: default}\n"},
	}
	if err := e.c.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	return newBundle(name, class, rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps,
		ConfigMaps: []rukpakv1alpha1.ConfigMapSource{{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: name}, Path: "manifests"}}})
}

func unpacked(e *env, name string) func() error {
	return func() error {
		b := &rukpakv1alpha1.Bundle{}
		if err := e.c.Get(context.Background(), client.ObjectKey{Name: name}, b); err != nil {
			return err
		}
		if !conditions.Is(b.Status.Conditions, rukpakv1alpha1.TypeUnpacked, metav1.ConditionTrue) {
			return fmt.Errorf("phase %q, conditions %+v", b.Status.Phase, b.Status.Conditions)
		}
		return nil
	}
}

// TestIntegrationStuckSourcesDoNotBlockOthers: many Bundles of one class
// whose git, image and http sources accept connections and never answer
// (more than the class has workers) do not stop a good Bundle of the same
// class from unpacking, on the leader or in the replica cache; deleting the
// stuck Bundles completes at once.
func TestIntegrationStuckSourcesDoNotBlockOthers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const class = "isolation"
	leader := &storage.LocalDirectory{RootDirectory: t.TempDir(), BaseURL: "https://content.test"}
	replica := &storage.LocalDirectory{RootDirectory: t.TempDir(), BaseURL: "https://content.test"}
	e.start(class, 10*time.Minute, leader, replica)

	addr := testnet.Blackhole(t)
	// RUKPAK_STUCK_PER_SOURCE scales the test up for measurements.
	perSource := 4
	if n, err := strconv.Atoi(os.Getenv("RUKPAK_STUCK_PER_SOURCE")); err == nil && n > 0 {
		perSource = n
	}
	var stuck []string
	for kind, src := range stuckSources(addr) {
		for i := range perSource {
			name := fmt.Sprintf("stuck-%s-%d", kind, i)
			e.create(newBundle(name, class, src))
			stuck = append(stuck, name)
		}
	}
	// Every stuck Bundle's fetch has started (and hangs).
	waitFor(t, patience, "the stuck Bundles to be Unpacking", func() error {
		for _, name := range stuck {
			if b := e.get(name); b.Status.Phase != rukpakv1alpha1.PhaseUnpacking {
				return fmt.Errorf("bundle %s: phase %q", name, b.Status.Phase)
			}
		}
		return nil
	})

	good := goodConfigMapBundle(t, e, "good", class)
	e.create(good)
	took := waitFor(t, patience, "the good Bundle to unpack", unpacked(e, "good"))
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("good Bundle Unpacked %s after creation, with %d stuck Bundles of its class (test process: heap in use %d MiB, %d goroutines)",
		took.Round(time.Millisecond), len(stuck), ms.HeapInuse>>20, runtime.NumGoroutine())
	if b := e.get("good"); !strings.HasPrefix(b.Status.ContentDigest, "sha256:") {
		t.Errorf("status.contentDigest = %q", b.Status.ContentDigest)
	}
	for _, name := range stuck {
		if b := e.get(name); b.Status.Phase != rukpakv1alpha1.PhaseUnpacking {
			t.Errorf("stuck bundle %s: phase %q, want still Unpacking", name, b.Status.Phase)
		}
	}

	// The replica cache, stuck on the same Bundles once they claim to be
	// unpacked, stores the good Bundle too.
	for _, name := range stuck {
		b := e.get(name)
		b.Status.ResolvedSource = b.Spec.Source.DeepCopy()
		conditions.Set(&b.Status.Conditions, b.Generation, rukpakv1alpha1.TypeUnpacked, metav1.ConditionTrue, rukpakv1alpha1.ReasonUnpackSuccessful, "forged")
		if err := e.c.Status().Update(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	good2 := goodConfigMapBundle(t, e, "good-2", class)
	e.create(good2)
	took = waitFor(t, patience, "the replica cache to store good-2", func() error {
		if err := unpacked(e, "good-2")(); err != nil {
			return err
		}
		ok, err := replica.Exists(ctx, e.get("good-2"))
		if !ok {
			return fmt.Errorf("not in the replica's storage (%w)", err)
		}
		return nil
	})
	t.Logf("good-2 Unpacked and in the replica cache %s after creation", took.Round(time.Millisecond))

	// Deleting the stuck Bundles cancels their fetches and completes.
	start := time.Now()
	for _, name := range stuck {
		if err := e.c.Delete(ctx, newBundle(name, class, rukpakv1alpha1.BundleSource{})); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, patience, "the stuck Bundles to be deleted", func() error {
		for _, name := range stuck {
			err := e.c.Get(ctx, client.ObjectKey{Name: name}, &rukpakv1alpha1.Bundle{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("bundle %s still exists (%w)", name, err)
			}
		}
		return nil
	})
	t.Logf("%d stuck Bundles deleted (finalizer removed) %s after the delete calls", len(stuck), time.Since(start).Round(time.Millisecond))
}

// TestIntegrationFetchDeadline: a fetch that never finishes fails the
// Bundle with a message naming the deadline.
func TestIntegrationFetchDeadline(t *testing.T) {
	e := newEnv(t)
	const class = "deadline"
	e.start(class, 2*time.Second, &storage.LocalDirectory{RootDirectory: t.TempDir(), BaseURL: "https://content.test"}, nil)
	addr := testnet.Blackhole(t)
	for kind, src := range stuckSources(addr) {
		t.Run(kind, func(t *testing.T) {
			name := "deadline-" + kind
			e.create(newBundle(name, class, src))
			waitFor(t, patience, "the fetch to time out", func() error {
				b := e.get(name)
				c := conditions.Get(b.Status.Conditions, rukpakv1alpha1.TypeUnpacked)
				if b.Status.Phase != rukpakv1alpha1.PhaseFailing || c == nil || c.Reason != rukpakv1alpha1.ReasonUnpackFailed {
					return fmt.Errorf("phase %q, condition %+v", b.Status.Phase, c)
				}
				const want = "source bundle content: fetching the source did not finish within 2s: "
				if !strings.HasPrefix(c.Message, want) {
					return fmt.Errorf("message %q, want it to start with %q", c.Message, want)
				}
				return nil
			})
		})
	}
}

// TestIntegrationStatusOnlyRepository: a repository named only in
// status.resolvedSource (written by someone with bundles/status) is never
// contacted, so it never gets the spec's credentials; the spec's
// repository is unpacked instead.
func TestIntegrationStatusOnlyRepository(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const class = "status-only"

	root := testgit.NewRoot(t)
	repo := root.NewRepo("bundles")
	repo.WriteFiles(map[string]string{"manifests/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: default}\n"})
	commit := repo.Commit("first")
	srv := root.ServeHTTP(testgit.HTTPOptions{Username: "team", Password: "s3cret"})

	var mu sync.Mutex
	var attackerGot []string
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		attackerGot = append(attackerGot, r.Method+" "+r.URL.Path+" auth="+r.Header.Get("Authorization"))
		mu.Unlock()
		http.NotFound(w, r)
	}))
	t.Cleanup(attacker.Close)

	// The team's Secret is for 127.0.0.1 (every port): the attacker's
	// repository is on an allowed host, as another repository on a shared
	// git host would be.
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "team-creds", Namespace: namespace,
			Annotations: map[string]string{rukpakv1alpha1.AnnotationAllowedHosts: "127.0.0.1"}},
		Data: map[string][]byte{"username": []byte("team"), "password": []byte("s3cret")},
	}
	if err := e.c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	auth := &rukpakv1alpha1.Authorization{Secret: &rukpakv1alpha1.LocalObjectReference{Name: "team-creds"}}
	b := newBundle("team-bundle", class, rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit, Git: &rukpakv1alpha1.GitSource{
		Repository: srv.RepoURL("bundles"), Ref: rukpakv1alpha1.GitRef{Branch: "main"}, Auth: auth}})
	e.create(b)
	// Before any provisioner looks at it, a status writer names their own
	// repository, with the spec's auth, as the resolved source.
	b.Status.ResolvedSource = &rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit, Git: &rukpakv1alpha1.GitSource{
		Repository: attacker.URL + "/evil", Ref: rukpakv1alpha1.GitRef{Commit: strings.Repeat("a", 40)}, Auth: auth}}
	if err := e.c.Status().Update(ctx, b); err != nil {
		t.Fatal(err)
	}

	e.start(class, time.Minute, &storage.LocalDirectory{RootDirectory: t.TempDir(), BaseURL: "https://content.test"}, nil)
	waitFor(t, patience, "the bundle to unpack", unpacked(e, "team-bundle"))
	got := e.get("team-bundle").Status.ResolvedSource
	if got == nil || got.Git == nil || got.Git.Repository != srv.RepoURL("bundles") || got.Git.Ref.Commit != commit {
		t.Errorf("resolvedSource = %+v, want the spec's repository at %s", got, commit)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(attackerGot) != 0 {
		t.Fatalf("the status-only repository was contacted: %q", attackerGot)
	}
}
