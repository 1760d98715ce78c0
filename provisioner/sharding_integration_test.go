package provisioner_test

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/provisioner"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/shard"
	"github.com/rukpak-dev/rukpak/storage"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/sources"
)

// shardInstance is one provisioner process of a sharded installation: its
// own manager, cache selector, storage and content URL, and a record of
// every write it sends to the API server.
type shardInstance struct {
	name      string
	store     *storage.LocalDirectory
	unpackDir string
	writes    *testenv.Requests
}

// startShard runs a provisioner as the binary does with
// --watch-label-selector=selector and --known-shards=known (plain class
// only).
func startShard(t *testing.T, env *testenv.Env, name, selector string, known ...string) *shardInstance {
	t.Helper()
	sh, err := shard.Parse(selector)
	testenv.MustNotError(t, err, "parsing selector %q", selector)
	cfg, writes := testenv.RecordWrites(env.Config)
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:                 env.Env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Logger:                 logr.Discard(),
		Cache:                  cache.Options{ByObject: sh.ByObject()},
	})
	testenv.MustNotError(t, err, "creating manager %s", name)
	s := &shardInstance{
		name:      name,
		store:     &storage.LocalDirectory{RootDirectory: t.TempDir(), BaseURL: "https://" + name + ".content.test"},
		unpackDir: t.TempDir(),
		writes:    writes,
	}
	err = provisioner.Setup(mgr, provisioner.Options{
		Classes:   []string{rukpakv1alpha1.ProvisionerClassPlain},
		Namespace: namespace,
		Unpacker:  sources.New(unpack.Config{Reader: mgr.GetAPIReader(), Namespace: namespace, BaseDir: s.unpackDir}),
		Storage:   s.store,
		Shard:     sh,

		KnownShards: known,
	})
	testenv.MustNotError(t, err, "setting up %s", name)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Logf("%s stopped: %v", name, err)
		}
	})
	return s
}

// stores reports whether s holds b's content.
func (s *shardInstance) stores(t *testing.T, b *rukpakv1alpha1.Bundle) bool {
	t.Helper()
	ok, err := s.store.Exists(context.Background(), b)
	testenv.MustNotError(t, err, "checking %s's storage", s.name)
	return ok
}

// cachesImage reports whether s's unpacker holds the image b was unpacked
// from (its tree, kept by digest).
func (s *shardInstance) cachesImage(t *testing.T, b *rukpakv1alpha1.Bundle) bool {
	t.Helper()
	src := b.Status.ResolvedSource
	if src == nil || src.Image == nil {
		t.Fatalf("bundle %s has no resolved image: %+v", b.Name, src)
	}
	_, digest, ok := strings.Cut(src.Image.Ref, "@")
	algorithm, hex, ok2 := strings.Cut(digest, ":")
	if !ok || !ok2 {
		t.Fatalf("bundle %s: resolved image %q is not pinned by digest", b.Name, src.Image.Ref)
	}
	// images/<repository key>/<algorithm>/<hex>
	found, err := filepath.Glob(filepath.Join(s.unpackDir, "images", "*", algorithm, hex))
	if err != nil {
		t.Fatal(err)
	}
	return len(found) > 0
}

// writesAbout returns s's writes since the last call, failing the test for
// any that concerns one of others (its URL or created name holds the
// name) or concerns nothing it may write (a create without a name,
// reviews aside).
func (s *shardInstance) writesAbout(t *testing.T, others ...string) []string {
	t.Helper()
	sent := s.writes.Take()
	for _, w := range sent {
		for _, o := range others {
			if strings.Contains(w, o) {
				t.Errorf("%s wrote %q, which concerns %s: not its own", s.name, w, o)
			}
		}
		method, rest, _ := strings.Cut(w, " ")
		uri, name, _ := strings.Cut(rest, " ")
		if method == "POST" && name == "" && !strings.HasSuffix(strings.SplitN(uri, "?", 2)[0], "reviews") {
			t.Errorf("%s created something unnamed: %q", s.name, w)
		}
	}
	return sent
}

// generatedBundle waits for bd's only generated Bundle to be unpacked and
// to satisfy check.
func (h *harness) generatedBundle(bd string, check func(*rukpakv1alpha1.Bundle) error) *rukpakv1alpha1.Bundle {
	h.t.Helper()
	var b *rukpakv1alpha1.Bundle
	eventually(h.t, "the generated bundle of "+bd, func() error {
		list := &rukpakv1alpha1.BundleList{}
		if err := h.c.List(context.Background(), list, client.MatchingLabels{rukpakv1alpha1.LabelOwnerName: bd}); err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d bundles", len(list.Items))
		}
		b = &list.Items[0]
		if !conditions.Is(b.Status.Conditions, rukpakv1alpha1.TypeUnpacked, metav1.ConditionTrue) {
			return fmt.Errorf("bundle %s not unpacked: %+v", b.Name, b.Status.Conditions)
		}
		return check(b)
	})
	return b
}

// onShard checks that b is labelled for shard (or unlabelled for "") and
// served and stored by s.
func onShard(t *testing.T, s *shardInstance, value string) func(*rukpakv1alpha1.Bundle) error {
	return func(b *rukpakv1alpha1.Bundle) error {
		if v, ok := b.Labels[shard.Label]; v != value || ok != (value != "") {
			return fmt.Errorf("bundle %s: label %s=%q (set: %v), want %q", b.Name, shard.Label, v, ok, value)
		}
		want, err := url.JoinPath(s.store.BaseURL, storage.BundlesPath, b.Name+".tgz")
		if err != nil {
			return err
		}
		if b.Status.ContentURL != want {
			return fmt.Errorf("bundle %s: contentURL %q, want %q", b.Name, b.Status.ContentURL, want)
		}
		if !s.stores(t, b) {
			return fmt.Errorf("bundle %s not in %s's storage", b.Name, s.name)
		}
		return nil
	}
}

// releaseRecords names the Secrets holding bd's release records.
func (h *harness) releaseRecords(bd string) []string {
	h.t.Helper()
	list := &corev1.SecretList{}
	testenv.MustNotError(h.t, h.c.List(context.Background(), list, client.InNamespace(namespace)), "listing secrets")
	var names []string
	for _, s := range list.Items {
		if strings.Contains(s.Name, "."+bd+".") {
			names = append(names, s.Name)
		}
	}
	slices.Sort(names)
	return names
}

// TestIntegrationSharding runs two provisioner processes against one API
// server, split as manifests/overlays/sharding splits them: "main" takes
// what has no core.rukpak.io/shard label, "shard1" what is labelled
// shard1. Each installs only its own BundleDeployments and writes nothing
// about the other's; a relabelled BundleDeployment moves with its Bundles,
// content and release, without applying anything again, and back.
func TestIntegrationSharding(t *testing.T) {
	t.Parallel()
	env := testenv.Pooled(t)
	ctx := context.Background()
	testenv.MustNotError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}), "creating namespace")
	h := &harness{t: t, env: env, c: env.Client, reg: testregistry.New(t)}
	mainShard := startShard(t, env, "main", "!"+shard.Label)
	shard1 := startShard(t, env, "shard1", shard.Label+" in (shard1)")

	one := newBD("bd-one", h.pushBundle("one", map[string]string{"manifests/cm.yaml": configMap("bd-one-cm", "v1")}))
	one.Labels = map[string]string{shard.Label: "shard1"}
	testenv.MustNotError(t, h.c.Create(ctx, one), "creating bd-one")
	unsharded := newBD("bd-main", h.pushBundle("main", map[string]string{"manifests/cm.yaml": configMap("bd-main-cm", "v1")}))
	// A template does not choose its Bundle's shard: the Bundle follows
	// its BundleDeployment (unlabelled: main).
	unsharded.Spec.Template.Metadata.Labels[shard.Label] = "shard1"
	testenv.MustNotError(t, h.c.Create(ctx, unsharded), "creating bd-main")

	t.Run("each shard installs its own", func(t *testing.T) {
		for _, name := range []string{"bd-one", "bd-main"} {
			h.waitBD(name, rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
			h.waitBD(name, rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "")
		}
		b1 := h.generatedBundle("bd-one", onShard(t, shard1, "shard1"))
		bm := h.generatedBundle("bd-main", onShard(t, mainShard, ""))
		if !mainShard.cachesImage(t, bm) || shard1.cachesImage(t, bm) {
			t.Errorf("%s's image cached by main %v, by shard1 %v", bm.Name, mainShard.cachesImage(t, bm), shard1.cachesImage(t, bm))
		}
		if mainShard.stores(t, b1) || shard1.stores(t, bm) {
			t.Errorf("content stored by the wrong shard: main has %s: %v, shard1 has %s: %v", b1.Name, mainShard.stores(t, b1), bm.Name, shard1.stores(t, bm))
		}
		if w := shard1.writesAbout(t, "bd-main"); len(w) == 0 {
			t.Error("shard1 wrote nothing")
		}
		if w := mainShard.writesAbout(t, "bd-one"); len(w) == 0 {
			t.Error("main wrote nothing")
		}
	})

	cmBefore, err := h.getCM("bd-main-cm")
	testenv.MustNotError(t, err, "reading bd-main-cm")
	recordsBefore := h.releaseRecords("bd-main")
	var moved *rukpakv1alpha1.Bundle
	t.Run("a relabelled BundleDeployment moves with its Bundle and release", func(t *testing.T) {
		// From here on, main has nothing to do: it owns nothing.
		mainShard.writesAbout(t, "bd-one")
		h.updateBD("bd-main", func(bd *rukpakv1alpha1.BundleDeployment) {
			if bd.Labels == nil {
				bd.Labels = map[string]string{}
			}
			bd.Labels[shard.Label] = "shard1"
		})
		moved = h.generatedBundle("bd-main", onShard(t, shard1, "shard1"))
		if !shard1.cachesImage(t, moved) {
			t.Errorf("shard1 did not unpack %s's image", moved.Name)
		}
		eventually(t, "main's copy of "+moved.Name+" and of its image removed", func() error {
			if mainShard.stores(t, moved) || mainShard.cachesImage(t, moved) {
				return fmt.Errorf("still stored by main (content %v, image %v)", mainShard.stores(t, moved), mainShard.cachesImage(t, moved))
			}
			return nil
		})
		// A reconcile asked for once the Bundle is here runs the whole
		// install path on shard1: it has taken over once it is recorded.
		h.updateBD("bd-main", func(bd *rukpakv1alpha1.BundleDeployment) {
			metav1.SetMetaDataAnnotation(&bd.ObjectMeta, rukpakv1alpha1.AnnotationReconcileRequestedAt, "after-move")
		})
		eventually(t, "the reconcile request handled", func() error {
			if got := h.bd("bd-main").Status.LastHandledReconcileAt; got != "after-move" {
				return fmt.Errorf("lastHandledReconcileAt %q", got)
			}
			return nil
		})
		bd := h.waitBD("bd-main", rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionTrue, rukpakv1alpha1.ReasonUnpackSuccessful, moved.Name)
		if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("Installed %+v", c)
		}
		if bd.Status.ActiveBundle != moved.Name {
			t.Errorf("activeBundle %q, want %q", bd.Status.ActiveBundle, moved.Name)
		}
		cm, err := h.getCM("bd-main-cm")
		testenv.MustNotError(t, err, "reading bd-main-cm")
		if cm.ResourceVersion != cmBefore.ResourceVersion {
			t.Errorf("bd-main-cm was written during the move: resourceVersion %s, was %s", cm.ResourceVersion, cmBefore.ResourceVersion)
		}
		if got := h.releaseRecords("bd-main"); !slices.Equal(got, recordsBefore) {
			t.Errorf("release records %v, were %v: the move made a release revision", got, recordsBefore)
		}
	})

	t.Run("the shard it left no longer acts on it", func(t *testing.T) {
		h.deleteCMAndAwaitRestore(t, "bd-main-cm")
		if w := mainShard.writesAbout(t); len(w) != 0 {
			t.Errorf("main, which owns nothing now, wrote %q", w)
		}
		sent := shard1.writesAbout(t)
		if !slices.ContainsFunc(sent, func(w string) bool { return strings.Contains(w, "/configmaps/bd-main-cm") }) {
			t.Errorf("shard1 did not restore bd-main-cm: its writes %q", sent)
		}
	})

	t.Run("moved back, after a rollout on the other shard", func(t *testing.T) {
		v2 := h.pushBundle("main-v2", map[string]string{"manifests/cm.yaml": configMap("bd-main-cm", "v2")})
		h.updateBD("bd-main", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = v2 })
		rolled := h.generatedBundle("bd-main", func(b *rukpakv1alpha1.Bundle) error {
			if b.Name == moved.Name {
				return fmt.Errorf("still %s", b.Name)
			}
			return onShard(t, shard1, "shard1")(b)
		})
		h.waitBD("bd-main", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, rolled.Name)

		// main remembered bd-main's Bundles from before it left; shard1
		// has recorded another since. Had main kept its memory, it would
		// refuse rolled as not created by this BundleDeployment.
		h.updateBD("bd-main", func(bd *rukpakv1alpha1.BundleDeployment) { delete(bd.Labels, shard.Label) })
		h.generatedBundle("bd-main", func(b *rukpakv1alpha1.Bundle) error {
			if b.Name != rolled.Name {
				return fmt.Errorf("bundle %s, want %s", b.Name, rolled.Name)
			}
			return onShard(t, mainShard, "")(b)
		})
		eventually(t, "shard1's copy of "+rolled.Name+" removed", func() error {
			if shard1.stores(t, rolled) {
				return fmt.Errorf("still stored by shard1")
			}
			return nil
		})
		h.waitBD("bd-main", rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionTrue, rukpakv1alpha1.ReasonUnpackSuccessful, rolled.Name)
		h.waitBD("bd-main", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, rolled.Name)
		cm, err := h.getCM("bd-main-cm")
		testenv.MustNotError(t, err, "reading bd-main-cm")
		if cm.Data["value"] != "v2" {
			t.Errorf("bd-main-cm value %q, want v2", cm.Data["value"])
		}
	})

	t.Run("a Bundle relabelled by someone else returns to its BundleDeployment's shard", func(t *testing.T) {
		b := h.generatedBundle("bd-one", onShard(t, shard1, "shard1"))
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			latest := h.bundle(b.Name)
			latest.Labels[shard.Label] = "nobody"
			return h.c.Update(ctx, latest)
		})
		testenv.MustNotError(t, err, "relabelling %s", b.Name)
		eventually(t, b.Name+" back on shard1", func() error {
			got := h.bundle(b.Name)
			if got.Labels[shard.Label] != "shard1" {
				return fmt.Errorf("label %q", got.Labels[shard.Label])
			}
			if got.UID != b.UID {
				return fmt.Errorf("bundle %s was replaced", b.Name)
			}
			return onShard(t, shard1, "shard1")(got)
		})
	})

	t.Run("bd-one stayed on shard1 throughout", func(t *testing.T) {
		h.generatedBundle("bd-one", onShard(t, shard1, "shard1"))
		h.waitBD("bd-one", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
		mainShard.writesAbout(t, "bd-one")
	})
}
