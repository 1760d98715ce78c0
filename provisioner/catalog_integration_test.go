package provisioner_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/heapwatch"
	"github.com/rukpak-dev/rukpak/internal/testcatalog"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/provisioner"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/storage"
)

// realCatalog is one package's catalog.yaml of the shared test data.
func realCatalog(t *testing.T, pkg string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testcatalog.Dir(), pkg, "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// catalogHarness is a harness whose provisioner serves Catalogs from
// store.
func catalogHarness(t *testing.T) (*harness, *storage.CatalogStore) {
	store := &storage.CatalogStore{RootDirectory: t.TempDir(), BaseURL: "https://content.test"}
	h := newHarnessWith(t, func(o *provisioner.Options) { o.Catalogs = store })
	return h, store
}

// waitCatalog waits until the Catalog's condition typ has status and its
// message contains msgPart, and returns it.
func (h *harness) waitCatalog(name, typ string, status metav1.ConditionStatus, reason, msgPart string) *rukpakv1alpha1.Catalog {
	h.t.Helper()
	c := &rukpakv1alpha1.Catalog{}
	eventually(h.t, fmt.Sprintf("catalog %s %s=%s %s %q", name, typ, status, reason, msgPart), func() error {
		if err := h.c.Get(context.Background(), client.ObjectKey{Name: name}, c); err != nil {
			return err
		}
		cond := conditions.Get(c.Status.Conditions, typ)
		if cond == nil || cond.Status != status || cond.Reason != reason || !strings.Contains(cond.Message, msgPart) || c.Status.ObservedGeneration != c.Generation {
			return fmt.Errorf("conditions %+v", c.Status.Conditions)
		}
		return nil
	})
	return c
}

func TestIntegrationCatalogs(t *testing.T) {
	t.Parallel()
	h, store := catalogHarness(t)
	ctx := context.Background()

	// A ConfigMap source: kube-green's real catalog.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-green-catalog", Namespace: namespace}, Data: map[string]string{"catalog.yaml": realCatalog(t, "kube-green")}, Immutable: ptr.To(true)}
	testenv.MustNotError(t, h.c.Create(ctx, cm), "creating the catalog ConfigMap")
	fromCM := &rukpakv1alpha1.Catalog{ObjectMeta: metav1.ObjectMeta{Name: "from-configmap"}, Spec: rukpakv1alpha1.CatalogSpec{
		Source: rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps, ConfigMaps: []rukpakv1alpha1.ConfigMapSource{{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: cm.Name}}}},
	}}
	testenv.MustNotError(t, h.c.Create(ctx, fromCM), "creating catalog from-configmap")

	// A registry image by tag, as catalogs are published (configs/), polled.
	ref := h.reg.Ref("catalogs/community:latest")
	h.reg.MustPush(t, ref, testregistry.Image(t, testregistry.Layer(t, map[string]string{
		"configs/cat-facts-operator/catalog.yaml": realCatalog(t, "cat-facts-operator"),
		"configs/infinispan/catalog.yaml":         realCatalog(t, "infinispan"),
	})))
	imageSource := rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: ref, CertificateData: string(h.reg.CAPEM)}}
	fromImage := &rukpakv1alpha1.Catalog{ObjectMeta: metav1.ObjectMeta{Name: "from-image"}, Spec: rukpakv1alpha1.CatalogSpec{
		Source: imageSource, PollInterval: &metav1.Duration{Duration: time.Minute}, Priority: 10,
	}}
	testenv.MustNotError(t, h.c.Create(ctx, fromImage), "creating catalog from-image")

	// An image that is not a catalog: a plain bundle.
	notCatalog := h.pushBundle("not-a-catalog", map[string]string{"manifests/cm.yaml": configMap("x", "y")})
	bad := &rukpakv1alpha1.Catalog{ObjectMeta: metav1.ObjectMeta{Name: "not-a-catalog"}, Spec: rukpakv1alpha1.CatalogSpec{Source: notCatalog}}
	testenv.MustNotError(t, h.c.Create(ctx, bad), "creating catalog not-a-catalog")

	got := h.waitCatalog("from-configmap", rukpakv1alpha1.TypeServing, metav1.ConditionTrue, rukpakv1alpha1.ReasonServing, "")
	if got.Status.Packages != 1 || got.Status.Channels != 1 || got.Status.Bundles != 10 || got.Status.ContentURL != "https://content.test/catalogs/from-configmap/" ||
		got.Status.LastUnpacked == nil || got.Status.ResolvedSource == nil || !strings.HasPrefix(got.Status.ContentDigest, "sha256:") {
		t.Fatalf("from-configmap status: %+v", got.Status)
	}
	if !containsString(got.Finalizers, rukpakv1alpha1.FinalizerDeleteCachedCatalog) {
		t.Fatalf("finalizers: %v", got.Finalizers)
	}
	img := h.waitCatalog("from-image", rukpakv1alpha1.TypeUnpacked, metav1.ConditionTrue, rukpakv1alpha1.ReasonUnpackSuccessful, "2 packages, 5 channels and 53 bundles")
	if img.Status.ResolvedSource == nil || img.Status.ResolvedSource.Image == nil || !strings.Contains(img.Status.ResolvedSource.Image.Ref, "@sha256:") {
		t.Fatalf("from-image resolvedSource: %+v", img.Status.ResolvedSource)
	}
	h.waitCatalog("not-a-catalog", rukpakv1alpha1.TypeUnpacked, metav1.ConditionFalse, rukpakv1alpha1.ReasonCatalogInvalid, "manifests/cm.yaml: blob 1: has no schema (is this a file-based catalog?)")
	h.waitCatalog("not-a-catalog", rukpakv1alpha1.TypeServing, metav1.ConditionFalse, rukpakv1alpha1.ReasonNotServing, "")

	t.Run("served to bound tokens only", func(t *testing.T) {
		cs, err := kubernetes.NewForConfig(h.env.Config)
		testenv.MustNotError(t, err, "clientset")
		authn, authz, err := storage.NewDelegatingAuth(h.env.Config, nil)
		testenv.MustNotError(t, err, "delegating auth")
		srv := httptest.NewServer(storage.WithAuth(storage.NewCatalogHandler(store), authn, authz, testLogger()))
		defer srv.Close()
		token := func(name string) string {
			_, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			if !apierrors.IsAlreadyExists(err) {
				testenv.MustNotError(t, err, "service account %s", name)
			}
			tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{storage.DefaultContentAudience}}}, metav1.CreateOptions{})
			testenv.MustNotError(t, err, "token for %s", name)
			return tr.Status.Token
		}
		raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "manifests", "base", "rbac", "catalog_reader_clusterrole.yaml"))
		testenv.MustNotError(t, err, "reading the catalog-reader ClusterRole")
		var role rbacv1.ClusterRole
		testenv.MustNotError(t, yaml.UnmarshalStrict(raw, &role), "decoding the catalog-reader ClusterRole")
		_, err = cs.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{})
		testenv.MustNotError(t, err, "creating the catalog-reader ClusterRole")
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "catalog-reader-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "reader", Namespace: "default"}},
		}, metav1.CreateOptions{})
		testenv.MustNotError(t, err, "binding catalog-reader")
		get := func(path, token string) (int, string) {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := http.DefaultClient.Do(req)
			testenv.MustNotError(t, err, "GET %s", path)
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		path := strings.TrimPrefix(got.Status.ContentURL, "https://content.test") + "packages/kube-green.jsonl"
		if code, body := get(path, token("reader")); code != http.StatusOK || strings.Count(body, "\n") != 12 || !strings.Contains(body, `"name":"kube-green.v0.7.1"`) {
			t.Fatalf("with catalog-reader: %d, %d lines", code, strings.Count(body, "\n"))
		}
		if code, _ := get(path, token("stranger")); code != http.StatusForbidden {
			t.Fatalf("without catalog-reader: %d, want 403", code)
		}
		if code, _ := get(path, ""); code != http.StatusUnauthorized {
			t.Fatalf("without a token: %d, want 401", code)
		}
	})

	t.Run("a failed unpack keeps serving the previous content", func(t *testing.T) {
		testenv.MustNotError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			c := &rukpakv1alpha1.Catalog{}
			if err := h.c.Get(ctx, client.ObjectKey{Name: "from-image"}, c); err != nil {
				return err
			}
			c.Spec.Source = notCatalog
			return h.c.Update(ctx, c)
		}), "pointing from-image at a bundle")
		h.waitCatalog("from-image", rukpakv1alpha1.TypeUnpacked, metav1.ConditionFalse, rukpakv1alpha1.ReasonCatalogInvalid, "has no schema")
		c := h.waitCatalog("from-image", rukpakv1alpha1.TypeServing, metav1.ConditionTrue, rukpakv1alpha1.ReasonServing, img.Status.ContentDigest)
		if c.Status.Bundles != 53 {
			t.Fatalf("counts changed: %+v", c.Status)
		}
		testenv.MustNotError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := h.c.Get(ctx, client.ObjectKey{Name: "from-image"}, c); err != nil {
				return err
			}
			c.Spec.Source = imageSource
			return h.c.Update(ctx, c)
		}), "pointing from-image back")
		h.waitCatalog("from-image", rukpakv1alpha1.TypeUnpacked, metav1.ConditionTrue, rukpakv1alpha1.ReasonUnpackSuccessful, "53 bundles")
	})

	t.Run("a moved tag is polled", func(t *testing.T) {
		h.reg.MustPush(t, ref, testregistry.Image(t, testregistry.Layer(t, map[string]string{
			"configs/cat-facts-operator/catalog.yaml": realCatalog(t, "cat-facts-operator"),
			"configs/sailoperator/catalog.yaml":       realCatalog(t, "sailoperator"),
		})))
		c := &rukpakv1alpha1.Catalog{}
		// Polled once a minute: the deadline allows for it.
		eventuallyWithin(t, testenv.WaitTimeout+time.Minute, "from-image polls the moved tag", func() error {
			if err := h.c.Get(ctx, client.ObjectKey{Name: "from-image"}, c); err != nil {
				return err
			}
			if c.Status.Bundles != 36 || c.Status.Channels != 11 {
				return fmt.Errorf("status %+v", c.Status)
			}
			return nil
		})
		if c.Status.ContentDigest == img.Status.ContentDigest || c.Status.ResolvedSource.Image.Ref == img.Status.ResolvedSource.Image.Ref {
			t.Fatalf("digests did not move: %+v", c.Status)
		}
		if _, err := store.ReadPackage("from-image", "sailoperator"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("deletion removes the content", func(t *testing.T) {
		testenv.MustNotError(t, h.c.Delete(ctx, &rukpakv1alpha1.Catalog{ObjectMeta: metav1.ObjectMeta{Name: "from-configmap"}}), "deleting from-configmap")
		eventually(t, "from-configmap gone", func() error {
			err := h.c.Get(ctx, client.ObjectKey{Name: "from-configmap"}, &rukpakv1alpha1.Catalog{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there: %w", err)
		})
		if _, err := store.Dir("from-configmap"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("stored content left: %v", err)
		}
	})
}

// TestIntegrationHeapOfLargeCatalog unpacks, validates, stores and serves
// a catalog of ~20 MB (the community catalog's size, renamed copies of the
// four real packages) from a registry image and holds the provisioner's
// live heap growth to 64 MiB.
func TestIntegrationHeapOfLargeCatalog(t *testing.T) {
	// Not parallel: it measures the heap of this process, changes its GC percent and waits for every controller in it to go idle, which parallel tests would disturb and be disturbed by.
	h, store := catalogHarness(t)
	ctx := context.Background()
	ref := h.reg.Ref("catalogs/large:v1")
	size := func() int {
		data := testcatalog.Large(t, 20<<20)
		h.reg.MustPush(t, ref, testregistry.Image(t, testregistry.Layer(t, map[string]string{"configs/catalog.json": string(data)})))
		return len(data)
	}()

	busy0 := busy(t)
	waitIdle(t, busy0)
	gcPercent := debug.SetGCPercent(peakGCPercent)
	defer debug.SetGCPercent(gcPercent)
	before := liveHeap()
	stop := heapwatch.Start()
	c := &rukpakv1alpha1.Catalog{ObjectMeta: metav1.ObjectMeta{Name: "large"}, Spec: rukpakv1alpha1.CatalogSpec{
		Source: rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: ref, CertificateData: string(h.reg.CAPEM)}},
	}}
	testenv.MustNotError(t, h.c.Create(ctx, c), "creating catalog large")
	got := h.waitCatalog("large", rukpakv1alpha1.TypeServing, metav1.ConditionTrue, rukpakv1alpha1.ReasonServing, "")
	// Served whole and by package.
	srv := httptest.NewServer(storage.NewCatalogHandler(store))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/catalogs/large/all.jsonl")
	testenv.MustNotError(t, err, "GET all.jsonl")
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	testenv.MustNotError(t, err, "reading all.jsonl")
	p, err := store.ReadPackage("large", "infinispan-c5")
	testenv.MustNotError(t, err, "ReadPackage")
	peak := stop()
	waitIdle(t, busy0)
	after := liveHeap()
	t.Logf("%.1f MB of catalog (%d packages, %d bundles; %d bytes served, %d bundles read back): live heap +%.1f MiB peak, +%.1f MiB retained",
		float64(size)/1e6, got.Status.Packages, got.Status.Bundles, n, len(p.Bundles), float64(peak)/(1<<20), (float64(after)-float64(before))/(1<<20))
	if got.Status.Packages != 48 || len(p.Bundles) != 49 {
		t.Fatalf("status %+v", got.Status)
	}
	if peak > 64<<20 {
		t.Fatalf("live heap grew %.1f MiB, want ≤ 64 MiB", float64(peak)/(1<<20))
	}
}
