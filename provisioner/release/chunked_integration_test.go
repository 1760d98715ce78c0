package release

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/kube"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/internal/leanclient"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// chunkEnv is an API server (which enforces the 1 MiB Secret limit) with a
// chunked driver and Helm's own Secrets driver on one namespace.
type chunkEnv struct {
	t    *testing.T
	env  *testenv.Env
	ns   string
	d    *chunkedSecrets
	helm *driver.Secrets
}

func newChunkEnv(t *testing.T) *chunkEnv {
	env := testenv.Shared(t)
	ns := testenv.Namespace(t, env, "records")
	cs := kubernetes.NewForConfigOrDie(env.Config)
	mc := metadata.NewForConfigOrDie(env.Config)
	d := newChunkedSecrets(cs.CoreV1().Secrets(ns), mc.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(ns), 0)
	hc, err := rest.HTTPClientFor(env.Config)
	testenv.MustNotError(t, err, "creating the HTTP client")
	lean, err := leanclient.New(env.Client, env.Config, hc)
	testenv.MustNotError(t, err, "creating the lean client")
	d.writes = leanSecrets{client: lean, namespace: ns}
	return &chunkEnv{t: t, env: env, ns: ns, d: d, helm: driver.NewSecrets(cs.CoreV1().Secrets(ns))}
}

// record is a release whose manifest holds n bytes that do not compress
// (base64 of random bytes compresses to 3/4, so n=3 MiB makes a ~2.3 MiB
// record: three chunks).
func record(name string, version, n int, status helmrelease.Status) *helmrelease.Release {
	rnd := rand.New(rand.NewPCG(uint64(version), uint64(n)))
	raw := make([]byte, n*3/4)
	for i := range raw {
		raw[i] = byte(rnd.Uint32())
	}
	manifest := "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\n  namespace: default\ndata:\n  blob: " + base64.StdEncoding.EncodeToString(raw) + "\n"
	r := &helmrelease.Release{
		Name: name, Namespace: "records", Version: version, Chart: emptyChart(name),
		Config: map[string]any{}, Manifest: manifest, Info: &helmrelease.Info{},
	}
	r.SetStatus(status, "status "+status.String())
	return r
}

func recordKey(name string, version int) string {
	return fmt.Sprintf("sh.helm.release.v1.%s.v%d", name, version)
}

// chunks returns the names of the chunk Secrets of release name, sorted.
func (e *chunkEnv) chunks(name string) []string {
	e.t.Helper()
	list := &corev1.SecretList{}
	if err := e.env.Client.List(context.Background(), list, client.InNamespace(e.ns), client.MatchingLabels{labelChunkRelease: name}); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		if s.Type != chunkSecretType || s.Immutable == nil || !*s.Immutable {
			e.t.Errorf("chunk %s: type %q immutable %v", s.Name, s.Type, s.Immutable)
		}
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

func (e *chunkEnv) secret(name string) *corev1.Secret {
	e.t.Helper()
	s := &corev1.Secret{}
	if err := e.env.Client.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

func sameRelease(t *testing.T, got, want *helmrelease.Release) {
	t.Helper()
	if got == nil {
		t.Fatal("no release")
	}
	if got.Name != want.Name || got.Version != want.Version || got.Manifest != want.Manifest || got.Info.Status != want.Info.Status {
		t.Fatalf("read back %s v%d (%s, %d manifest bytes), want %s v%d (%s, %d bytes)",
			got.Name, got.Version, got.Info.Status, len(got.Manifest), want.Name, want.Version, want.Info.Status, len(want.Manifest))
	}
}

func TestIntegrationChunkedRecords(t *testing.T) {
	t.Parallel()
	e := newChunkEnv(t)
	ctx := context.Background()

	t.Run("a record that fits one Secret is Helm's own", func(t *testing.T) {
		small := record("small", 1, 10<<10, helmrelease.StatusDeployed)
		if err := e.d.Create(recordKey("small", 1), small); err != nil {
			t.Fatal(err)
		}
		s := e.secret(recordKey("small", 1))
		if s.Type != "helm.sh/release.v1" || len(s.Data) != 1 || s.Labels["owner"] != "helm" || s.Labels["name"] != "small" ||
			s.Labels["status"] != "deployed" || s.Labels["version"] != "1" || s.Labels["createdAt"] == "" {
			t.Errorf("small record: type %q, data keys %d, labels %v", s.Type, len(s.Data), s.Labels)
		}
		got, err := e.helm.Get(recordKey("small", 1)) // Helm's driver reads it
		if err != nil {
			t.Fatal(err)
		}
		sameRelease(t, got, small)
		if c := e.chunks("small"); len(c) != 0 {
			t.Errorf("chunks of a small record: %v", c)
		}
	})

	big := record("big", 1, 3<<20, helmrelease.StatusPendingInstall)
	t.Run("a record over 1 MiB is split and read back whole", func(t *testing.T) {
		if err := e.d.Create(recordKey("big", 1), big); err != nil {
			t.Fatal(err)
		}
		chunks := e.chunks("big")
		if len(chunks) != 3 {
			t.Fatalf("chunks %v, want 3", chunks)
		}
		idx := e.secret(recordKey("big", 1))
		if idx.Type != "helm.sh/release.v1" || idx.Labels["owner"] != "helm" || idx.Labels["status"] != "pending-install" || string(idx.Data[dataChunks]) != "3" {
			t.Errorf("index: type %q labels %v chunks %q", idx.Type, idx.Labels, idx.Data[dataChunks])
		}
		for i, c := range chunks {
			if want := chunkName(recordKey("big", 1), idx.Labels[labelDigest], i+1); c != want {
				t.Errorf("chunk %d is %s, want %s", i+1, c, want)
			}
		}
		got, err := e.d.Get(recordKey("big", 1))
		if err != nil {
			t.Fatal(err)
		}
		sameRelease(t, got, big)
		if err := e.d.Create(recordKey("big", 1), big); !errors.Is(err, driver.ErrReleaseExists) {
			t.Errorf("creating an existing revision: %v", err)
		}
	})

	t.Run("helm's own driver lists the split record and ignores its chunks", func(t *testing.T) {
		got, err := e.helm.Get(recordKey("big", 1))
		if err != nil {
			t.Fatal(err)
		}
		if got.Info.Status != helmrelease.StatusPendingInstall || !strings.HasPrefix(got.Manifest, placeholderMarker) || got.Chart.Metadata.Name != "big" {
			t.Errorf("helm reads %s %q %v", got.Info.Status, got.Manifest, got.Chart.Metadata)
		}
		// Helm's rollback, upgrade and uninstall build objects from the
		// manifest: the placeholder makes them fail rather than act on an
		// empty release.
		getter, err := newRESTGetter(e.env.Config, e.ns)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kube.New(getter).Build(strings.NewReader(got.Manifest), false); err == nil || !strings.Contains(err.Error(), "Object 'Kind' is missing") {
			t.Errorf("helm builds objects from the placeholder: %v", err)
		}
		hist, err := storage.Init(e.helm).History("big")
		if err != nil || len(hist) != 1 || hist[0].Version != 1 {
			t.Errorf("helm history: %d records, %v", len(hist), err)
		}
		cfg := &action.Configuration{Releases: storage.Init(e.helm), KubeClient: &kubefake.PrintingKubeClient{}, Log: func(string, ...any) {}}
		list := action.NewList(cfg)
		list.StateMask = action.ListAll
		rels, err := list.Run()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range rels {
			names = append(names, fmt.Sprintf("%s.v%d", r.Name, r.Version))
		}
		if fmt.Sprint(names) != "[big.v1 small.v1]" {
			t.Errorf("helm list: %v", names)
		}
	})

	t.Run("updates move between one Secret and chunks without leftovers", func(t *testing.T) {
		steps := []struct {
			size   int
			status helmrelease.Status
			chunks int
		}{
			{3 << 20, helmrelease.StatusDeployed, 3},
			{5 << 20, helmrelease.StatusDeployed, 4},
			{10 << 10, helmrelease.StatusFailed, 0},
			{2 << 20, helmrelease.StatusSuperseded, 2},
		}
		for _, s := range steps {
			r := record("big", 1, s.size, s.status)
			if err := e.d.Update(recordKey("big", 1), r); err != nil {
				t.Fatalf("update to %d bytes: %v", s.size, err)
			}
			if c := e.chunks("big"); len(c) != s.chunks {
				t.Errorf("after an update to %d bytes: chunks %v, want %d", s.size, c, s.chunks)
			}
			got, err := e.d.Get(recordKey("big", 1))
			if err != nil {
				t.Fatal(err)
			}
			sameRelease(t, got, r)
		}
		if err := e.d.Update(recordKey("big", 9), big); !apierrors.IsNotFound(err) {
			t.Errorf("updating a missing revision: %v", err)
		}
	})

	t.Run("query and list return whole releases", func(t *testing.T) {
		for v := 2; v <= 3; v++ {
			if err := e.d.Create(recordKey("big", v), record("big", v, 2<<20, helmrelease.StatusDeployed)); err != nil {
				t.Fatal(err)
			}
		}
		hist, err := e.d.Query(map[string]string{"name": "big", "owner": "helm"})
		if err != nil {
			t.Fatal(err)
		}
		if len(hist) != 3 {
			t.Fatalf("history of big: %d records", len(hist))
		}
		for _, r := range hist {
			sameRelease(t, r, record("big", r.Version, 2<<20, r.Info.Status))
		}
		deployed, err := e.d.Query(map[string]string{"name": "big", "owner": "helm", "status": "deployed"})
		if err != nil || len(deployed) != 2 {
			t.Errorf("deployed revisions: %d, %v", len(deployed), err)
		}
		all, err := e.d.List(func(r *helmrelease.Release) bool { return r.Name == "big" })
		if err != nil || len(all) != 3 || len(all[0].Manifest) < 2<<20 {
			t.Errorf("list: %d releases, %v", len(all), err)
		}
		if _, err := e.d.Query(map[string]string{"name": "none"}); !errors.Is(err, driver.ErrReleaseNotFound) {
			t.Errorf("query of a missing release: %v", err)
		}
	})

	t.Run("deleting a record deletes its chunks", func(t *testing.T) {
		got, err := e.d.Delete(recordKey("big", 2))
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != 2 {
			t.Errorf("deleted revision %d", got.Version)
		}
		for _, c := range e.chunks("big") {
			if strings.HasPrefix(c, recordKey("big", 2)+".") {
				t.Errorf("chunk %s of the deleted record is left", c)
			}
		}
		if _, err := e.d.Get(recordKey("big", 2)); !errors.Is(err, driver.ErrReleaseNotFound) {
			t.Errorf("reading a deleted revision: %v", err)
		}
		if _, err := e.d.Delete(recordKey("big", 2)); !errors.Is(err, driver.ErrReleaseNotFound) {
			t.Errorf("deleting twice: %v", err)
		}
	})

	t.Run("a write interrupted before its index leaves nothing readable and is cleaned up", func(t *testing.T) {
		r := record("crash", 1, 2<<20, helmrelease.StatusPendingInstall)
		gz, err := e.d.encode(r)
		if err != nil {
			t.Fatal(err)
		}
		// The process dies after writing the chunks, before the index.
		if _, err := e.d.writeChunks(ctx, recordKey("crash", 1), r, gz, recordLabels(r, "createdAt")); err != nil {
			t.Fatal(err)
		}
		if _, err := e.d.Get(recordKey("crash", 1)); !errors.Is(err, driver.ErrReleaseNotFound) {
			t.Errorf("a record whose index was never written: %v", err)
		}
		if _, err := e.d.Query(map[string]string{"name": "crash", "owner": "helm"}); !errors.Is(err, driver.ErrReleaseNotFound) {
			t.Errorf("history of a record whose index was never written: %v", err)
		}
		// The retry writes other content (a new timestamp): the leftovers go.
		r2 := record("crash", 1, 2<<20, helmrelease.StatusFailed)
		if err := e.d.Create(recordKey("crash", 1), r2); err != nil {
			t.Fatal(err)
		}
		idx := e.secret(recordKey("crash", 1))
		for _, c := range e.chunks("crash") {
			if !strings.HasPrefix(c, recordKey("crash", 1)+"."+idx.Labels[labelDigest]+".") {
				t.Errorf("leftover chunk %s", c)
			}
		}
		// The same content again (a retried write): its chunks are reused.
		if _, err := e.d.writeChunks(ctx, recordKey("crash", 1), r2, mustEncode(t, e.d, r2), recordLabels(r2, "createdAt")); err != nil {
			t.Errorf("rewriting identical chunks: %v", err)
		}
		// Deleted by another tool (kubectl, helm uninstall): the next delete
		// of any revision of the release removes the chunks.
		if err := e.env.Client.Delete(ctx, idx); err != nil {
			t.Fatal(err)
		}
		if err := e.d.Create(recordKey("crash", 2), record("crash", 2, 1<<10, helmrelease.StatusDeployed)); err != nil {
			t.Fatal(err)
		}
		if _, err := e.d.Delete(recordKey("crash", 2)); err != nil {
			t.Fatal(err)
		}
		if c := e.chunks("crash"); len(c) != 0 {
			t.Errorf("chunks left after the release's records were deleted: %v", c)
		}
	})

	t.Run("a record over the maximum is refused before anything is written", func(t *testing.T) {
		small := *e.d
		small.maxRecordBytes = 1 << 20
		huge := record("huge", 1, 2<<20, helmrelease.StatusPendingInstall)
		err := small.Create(recordKey("huge", 1), huge)
		want := fmt.Sprintf(`release record too large: release "huge" revision 1 has a %d-byte manifest, more than the maximum of 1048576 bytes`, len(huge.Manifest))
		if !errors.Is(err, ErrRecordTooLarge) || err.Error() != want {
			t.Errorf("got %v", err)
		}
		if c := e.chunks("huge"); len(c) != 0 {
			t.Errorf("chunks written: %v", c)
		}
		// A record written under a larger maximum is refused on read too.
		if _, err := small.Get(recordKey("big", 1)); !errors.Is(err, ErrRecordTooLarge) {
			t.Errorf("reading a record over the maximum: %v", err)
		}
	})
}

func mustEncode(t *testing.T, d *chunkedSecrets, r *helmrelease.Release) []byte {
	t.Helper()
	gz, err := d.encode(r)
	if err != nil {
		t.Fatal(err)
	}
	return gz
}

// A chunked record that was tampered with reads back as a clear error naming
// it, never as a release: Get, Query (the history Manager decides on) and
// Delete (which removes it all the same, so uninstall can proceed).
func TestIntegrationChunkedRecordCorruption(t *testing.T) {
	t.Parallel()
	e := newChunkEnv(t)
	ctx := context.Background()
	c := e.env.Client

	// replace recreates a chunk (chunks are immutable) with other data.
	replace := func(name string, edit func(*corev1.Secret)) {
		s := e.secret(name)
		if err := c.Delete(ctx, s); err != nil {
			t.Fatal(err)
		}
		s.ObjectMeta = metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: s.Labels}
		edit(s)
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	other := record("other", 1, 3<<20, helmrelease.StatusDeployed)
	if err := e.d.Create(recordKey("other", 1), other); err != nil {
		t.Fatal(err)
	}

	for i, tc := range []struct {
		name   string
		tamper func(k, digest string)
		want   string
	}{
		{"a missing chunk", func(k, digest string) {
			if err := c.Delete(ctx, e.secret(chunkName(k, digest, 2))); err != nil {
				t.Fatal(err)
			}
		}, "chunk 2 of 3 (Secret %[1]s.%[2]s.2) is missing"},
		{"an altered chunk", func(k, digest string) {
			replace(chunkName(k, digest, 3), func(s *corev1.Secret) { s.Data[dataChunk][1000] ^= 0xff })
		}, "chunk 3 of 3 (Secret %[1]s.%[2]s.3) does not match its checksum"},
		{"a truncated chunk", func(k, digest string) {
			replace(chunkName(k, digest, 3), func(s *corev1.Secret) { s.Data[dataChunk] = s.Data[dataChunk][:100] })
		}, "chunk 3 of 3 (Secret %[1]s.%[2]s.3) does not match its checksum"},
		{"a chunk of another record under this record's name", func(k, digest string) {
			o := e.secret(recordKey("other", 1))
			src := e.secret(chunkName(recordKey("other", 1), o.Labels[labelDigest], 2))
			replace(chunkName(k, digest, 2), func(s *corev1.Secret) { s.Data = src.Data })
		}, "chunk 2 of 3 (Secret %[1]s.%[2]s.2) does not match its checksum"},
		{"a foreign Secret under a chunk's name", func(k, digest string) {
			replace(chunkName(k, digest, 1), func(s *corev1.Secret) { s.Labels[labelChunkVersion] = "7" })
		}, "chunk 1 of 3 (Secret %[1]s.%[2]s.1) belongs to another record"},
		{"an index whose checksum was changed", func(k, _ string) {
			idx := e.secret(k)
			idx.Data[dataSHA256] = []byte(strings.Repeat("0", 64))
			if err := c.Update(ctx, idx); err != nil {
				t.Fatal(err)
			}
		}, "chunk 1 of 3 (Secret %[1]s.0000000000000000.1) is missing"},
		{"an index rewritten by Helm without its chunk references", func(k, _ string) {
			idx := e.secret(k)
			delete(idx.Data, dataSHA256)
			if err := c.Update(ctx, idx); err != nil {
				t.Fatal(err)
			}
		}, "holds only the placeholder of a record split across Secrets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("bad%d", i)
			k := recordKey(name, 1)
			if err := e.d.Create(k, record(name, 1, 3<<20, helmrelease.StatusDeployed)); err != nil {
				t.Fatal(err)
			}
			digest := e.secret(k).Labels[labelDigest]
			tc.tamper(k, digest)
			want := tc.want
			if strings.Contains(want, "%") {
				want = fmt.Sprintf(want, k, digest)
			}

			rls, err := e.d.Get(k)
			if rls != nil || !errors.Is(err, ErrCorruptRecord) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), k) {
				t.Errorf("Get: %v, want an error with %q", err, want)
			}
			if _, err := e.d.Query(map[string]string{"name": name, "owner": "helm"}); !errors.Is(err, ErrCorruptRecord) || !strings.Contains(err.Error(), want) {
				t.Errorf("Query: %v", err)
			}
			if _, err := e.d.Delete(k); !errors.Is(err, ErrCorruptRecord) || !strings.Contains(err.Error(), "deleted release record "+k+", which was unreadable") {
				t.Errorf("Delete: %v", err)
			}
			if _, err := e.d.Get(k); !errors.Is(err, driver.ErrReleaseNotFound) {
				t.Errorf("after Delete: %v", err)
			}
			if left := e.chunks(name); len(left) != 0 {
				t.Errorf("chunks left: %v", left)
			}
		})
	}
	// The untouched record still reads back.
	got, err := e.d.Get(recordKey("other", 1))
	if err != nil {
		t.Fatal(err)
	}
	sameRelease(t, got, other)
}

// Manager keeps maxHistory revisions of a release whose records are split,
// and pruning removes the chunks of the revisions it drops.
func TestIntegrationChunkedHistoryPruning(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	ctx := context.Background()
	ns, apps := testenv.Namespace(t, env, "rukpak-system"), testenv.Namespace(t, env, "apps")
	m, err := NewManager(env.Config, ns)
	if err != nil {
		t.Fatal(err)
	}
	e := &chunkEnv{t: t, env: env, ns: ns}
	for v := 1; v <= maxHistory+2; v++ {
		// 2 x 800 KiB that do not compress: a record over 1 MiB.
		var cms []*unstructured.Unstructured
		for i := range 2 {
			blob := record("pruned", v*10+i, 800<<10, helmrelease.StatusDeployed).Manifest
			blob = blob[strings.Index(blob, "blob: ")+len("blob: ") : len(blob)-1]
			cms = append(cms, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": fmt.Sprintf("pruned-%d", i), "namespace": apps},
				"data":     map[string]any{"blob": blob},
			}})
		}
		res, err := m.Apply(ctx, "pruned", cms, nil)
		if err != nil {
			t.Fatalf("revision %d: %v", v, err)
		}
		if res.Release.Version != v {
			t.Fatalf("revision %d recorded as %d", v, res.Release.Version)
		}
	}
	hist, err := m.store.History("pruned")
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]string{}
	for _, r := range hist {
		got[r.Version] = r.Info.Status.String()
	}
	if fmt.Sprint(got) != "map[3:superseded 4:superseded 5:superseded 6:superseded 7:deployed]" {
		t.Errorf("history %v", got)
	}
	chunks := e.chunks("pruned")
	if len(chunks) != 2*maxHistory {
		t.Errorf("chunks %v, want two for each of the %d records kept", chunks, maxHistory)
	}
	for _, c := range chunks {
		if strings.HasPrefix(c, recordKey("pruned", 1)+".") || strings.HasPrefix(c, recordKey("pruned", 2)+".") {
			t.Errorf("chunk %s of a pruned revision is left", c)
		}
	}

	t.Run("a release over the maximum record size fails before any object is applied", func(t *testing.T) {
		small, err := NewManager(env.Config, ns, WithMaxRecordBytes(64<<10))
		if err != nil {
			t.Fatal(err)
		}
		cm := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "too-big", "namespace": apps},
			"data":     map[string]any{"blob": strings.Repeat("x", 100<<10)},
		}}
		_, err = small.Apply(ctx, "too-big", []*unstructured.Unstructured{cm}, nil)
		if err == nil || !regexp.MustCompile(`^recording release "too-big": release record too large: release "too-big" revision 1 has a \d+-byte manifest, more than the maximum of 65536 bytes$`).MatchString(err.Error()) {
			t.Errorf("got %v", err)
		}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: apps, Name: "too-big"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("the ConfigMap was applied: %v", err)
		}
	})
}

// TestLeanSecretsAnswerMetadata: a record written through leanSecrets is
// answered with its metadata alone (UID and resourceVersion as the API
// server holds them), and refusals keep their API errors (a create of an
// existing name is AlreadyExists, a stale update a Conflict).
func TestLeanSecretsAnswerMetadata(t *testing.T) {
	e := newChunkEnv(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(e.env.Config)
	lean := e.d.writes
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "lean"}, Data: map[string][]byte{"release": bytes.Repeat([]byte("x"), 64<<10)}}
	created, err := lean.Create(ctx, s.DeepCopy(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoreV1().Secrets(e.ns).Get(ctx, "lean", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.UID != got.UID || created.ResourceVersion != got.ResourceVersion || created.Name != "lean" {
		t.Errorf("create answered %s %s %s, the Secret is %s %s", created.Name, created.UID, created.ResourceVersion, got.UID, got.ResourceVersion)
	}
	if _, err := lean.Create(ctx, s.DeepCopy(), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("a second create: %v, want AlreadyExists", err)
	}
	update := s.DeepCopy()
	update.ResourceVersion = created.ResourceVersion
	update.Data["release"] = []byte("y")
	updated, err := lean.Update(ctx, update, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.UID != created.UID || updated.ResourceVersion == created.ResourceVersion {
		t.Errorf("update answered %s %s after %s %s", updated.UID, updated.ResourceVersion, created.UID, created.ResourceVersion)
	}
	if _, err := lean.Update(ctx, update, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("an update at a stale resourceVersion: %v, want Conflict", err)
	}
}
