package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/catalog/fbc"
	"github.com/rukpak-dev/rukpak/catalog/resolve"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/storage"
)

// TestCatalogCluster reads Catalogs on a real API server from the content
// handler as the provisioner serves them, behind TokenReview and
// SubjectAccessReview: listing fetches the whole document and checks its
// digest, resolving fetches one package per catalog and orders catalogs
// by spec.priority, and the temporary catalog-reader ServiceAccount is
// removed afterwards.
func TestCatalogCluster(t *testing.T) {
	env := testenv.Pooled(t)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	testenv.MustNotError(t, err, "creating clientset")
	const ns = "rukpak-system"
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	testenv.MustNotError(t, err, "creating namespace")
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "manifests", "base", "rbac", "catalog_reader_clusterrole.yaml"))
	testenv.MustNotError(t, err, "reading the catalog-reader ClusterRole")
	var role rbacv1.ClusterRole
	testenv.MustNotError(t, yaml.UnmarshalStrict(raw, &role), "decoding the catalog-reader ClusterRole")
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{})
	testenv.MustNotError(t, err, "creating the catalog-reader ClusterRole")

	// Catalogs stored and served as the provisioner does.
	store := &storage.CatalogStore{RootDirectory: t.TempDir()}
	authn, authz, err := storage.NewDelegatingAuth(env.Config, nil)
	testenv.MustNotError(t, err, "delegating auth")
	mux := http.NewServeMux()
	mux.Handle(storage.CatalogsPath, storage.WithAuth(storage.NewCatalogHandler(store), authn, authz, testr.New(t)))
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	store.BaseURL = srv.URL
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	testenv.MustNotError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600), "writing CA")

	serve := func(name string, priority int32, pkgs ...string) {
		t.Helper()
		staged, err := store.Stage()
		testenv.MustNotError(t, err, "staging %s", name)
		x, err := fbc.Build(os.DirFS(catalogDir(t, pkgs...)), staged, fbc.Limits{})
		testenv.MustNotError(t, err, "building %s", name)
		testenv.MustNotError(t, store.Commit(name, staged, x.Digest), "storing %s", name)
		c := &rukpakv1alpha1.Catalog{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: rukpakv1alpha1.CatalogSpec{Priority: priority, Source: rukpakv1alpha1.BundleSource{
				Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: "example.com/" + name + ":latest"},
			}},
		}
		testenv.MustNotError(t, env.Client.Create(ctx, c), "creating Catalog %s", name)
		c.Status = rukpakv1alpha1.CatalogStatus{ContentURL: store.URLFor(name), ContentDigest: x.Digest, Conditions: []metav1.Condition{{
			Type: rukpakv1alpha1.TypeServing, Status: metav1.ConditionTrue, Reason: rukpakv1alpha1.ReasonServing, Message: "served", LastTransitionTime: metav1.Now(),
		}}}
		testenv.MustNotError(t, env.Client.Status().Update(ctx, c), "writing Catalog %s status", name)
	}
	serve("community", 0, "cat-facts-operator", "infinispan", "kube-green")
	serve("mirror", 10, "kube-green")

	opts := func(co contentOptions) *catalogOptions {
		co.config, co.namespace = env.Config, ns
		if co.caFile == "" {
			co.caFile = caFile
		}
		return &catalogOptions{output: "table", timeout: 2 * time.Minute, source: catalogSourceOptions{content: co}}
	}
	resolveJSON := func(t *testing.T, o *catalogOptions, sources []string, f resolveFlags) *resolveOutput {
		t.Helper()
		o.output = "json"
		var out bytes.Buffer
		testenv.MustNotError(t, o.resolve(ctx, &out, sources, f), "resolve")
		var r resolveOutput
		testenv.MustNotError(t, json.Unmarshal(out.Bytes(), &r), "decoding %s", out.String())
		return &r
	}
	leftBehind := func(t *testing.T) {
		t.Helper()
		crbs, err := cs.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=rukpakctl"})
		testenv.MustNotError(t, err, "listing bindings")
		sas, err := cs.CoreV1().ServiceAccounts(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=rukpakctl"})
		testenv.MustNotError(t, err, "listing service accounts")
		if len(crbs.Items) != 0 || len(sas.Items) != 0 {
			t.Fatalf("left %d bindings and %d service accounts behind", len(crbs.Items), len(sas.Items))
		}
	}

	t.Run("list a Catalog's packages", func(t *testing.T) {
		var out bytes.Buffer
		testenv.MustNotError(t, opts(contentOptions{}).list(ctx, &out, "catalog/community", ""), "list")
		want := `PACKAGE             DEFAULT CHANNEL  CHANNELS  BUNDLES  LATEST
cat-facts-operator  stable           1         4        1.1.2
infinispan          stable           4         49       2.5.14
kube-green          alpha            1         10       0.7.1
`
		if out.String() != want {
			t.Fatalf("got:\n%s\nwant:\n%s", out.String(), want)
		}
		leftBehind(t)
	})

	t.Run("list one package of a Catalog", func(t *testing.T) {
		var out bytes.Buffer
		testenv.MustNotError(t, opts(contentOptions{}).list(ctx, &out, "catalog/community", "cat-facts-operator"), "list")
		if !strings.Contains(out.String(), "Catalog:          community\n") ||
			!strings.HasSuffix(out.String(), "stable   cat-facts-operator.v1.1.2  1.0.0 1.1.0 1.1.1 1.1.2\n") {
			t.Fatalf("got:\n%s", out.String())
		}
	})

	t.Run("the higher priority wins; a package only one has comes from it", func(t *testing.T) {
		r := resolveJSON(t, opts(contentOptions{}), []string{"catalog/community", "catalog/mirror"}, resolveFlags{pkg: "kube-green", installedVersion: "0.6.0"})
		if r.Resolved.Catalog != "mirror" || r.Resolved.Bundle != "kube-green.v0.7.0" || len(r.UpgradePath) != 2 || r.UpgradePath[1].Catalog != "mirror" {
			t.Fatalf("%+v", r)
		}
		r = resolveJSON(t, opts(contentOptions{}), []string{"catalog/community", "catalog/mirror"}, resolveFlags{pkg: "infinispan", channels: []string{"2.2.x"}})
		if r.Resolved.Catalog != "community" || r.Resolved.Bundle != "infinispan-operator.v2.2.5" {
			t.Fatalf("%+v", r)
		}
		// A directory has priority 0: the mirror still wins.
		r = resolveJSON(t, opts(contentOptions{}), []string{catalogDir(t, "kube-green"), "catalog/mirror"}, resolveFlags{pkg: "kube-green"})
		if r.Resolved.Catalog != "mirror" {
			t.Fatalf("%+v", r)
		}
		leftBehind(t)
	})

	t.Run("a failed resolution names every Catalog", func(t *testing.T) {
		err := opts(contentOptions{}).resolve(ctx, &bytes.Buffer{}, []string{"catalog/community", "catalog/mirror"}, resolveFlags{pkg: "kube-green", versionRange: ">=1"})
		want := `no bundle of package "kube-green" for version range ">=1" in any channel (catalog "community": 10 bundles, 0 in channels and range; catalog "mirror": 10 bundles, 0 in channels and range)`
		if err == nil || err.Error() != want {
			t.Fatalf("got %v\nwant %s", err, want)
		}
	})

	t.Run("--content-url instead of status.contentURL", func(t *testing.T) {
		var out bytes.Buffer
		testenv.MustNotError(t, opts(contentOptions{contentURL: srv.URL + "/"}).list(ctx, &out, "catalog/mirror", ""), "list")
		if !strings.Contains(out.String(), "kube-green  alpha") {
			t.Fatalf("got:\n%s", out.String())
		}
	})

	t.Run("a ServiceAccount without catalog-reader is refused by the content service", func(t *testing.T) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "stranger", Namespace: ns}}, metav1.CreateOptions{})
		testenv.MustNotError(t, err, "creating service account")
		err = opts(contentOptions{serviceAccount: ns + "/stranger"}).list(ctx, &bytes.Buffer{}, "catalog/community", "")
		if err == nil || !strings.Contains(err.Error(), "403 Forbidden") || !strings.Contains(err.Error(), "/catalogs/community/index.json") {
			t.Fatalf("got %v, want the content service's 403", err)
		}
	})

	t.Run("a served document that does not match its index", func(t *testing.T) {
		serve("tampered", 0, "cat-facts-operator")
		dir, err := store.Dir("tampered")
		testenv.MustNotError(t, err, "finding the stored document")
		doc := filepath.Join(dir, fbc.DocumentFile)
		data, err := os.ReadFile(doc)
		testenv.MustNotError(t, err, "reading the stored document")
		// Same size, other bytes: only the digest tells.
		data = bytes.Replace(data, []byte("cat-facts-operator.v1.1.2"), []byte("cat-facts-operator.v9.1.2"), 1)
		testenv.MustNotError(t, os.WriteFile(doc, data, 0o644), "tampering")
		err = opts(contentOptions{}).list(ctx, &bytes.Buffer{}, "catalog/tampered", "")
		if err == nil || !strings.Contains(err.Error(), `catalog "tampered": all.jsonl has digest sha256:`) || !strings.Contains(err.Error(), "the catalog changed while reading it") {
			t.Fatalf("got %v", err)
		}
	})

	t.Run("--from-bundledeployment resolves as the provisioner would", func(t *testing.T) {
		bd := &rukpakv1alpha1.BundleDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: "kube-green"},
			Spec: rukpakv1alpha1.BundleDeploymentSpec{
				ProvisionerClassName: rukpakv1alpha1.ProvisionerClassRegistry,
				Template: rukpakv1alpha1.BundleTemplate{Spec: rukpakv1alpha1.BundleSpec{
					ProvisionerClassName: rukpakv1alpha1.ProvisionerClassRegistry,
					Source: rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeCatalog, Catalog: &rukpakv1alpha1.CatalogSource{
						PackageName: "kube-green", Version: "<0.7.0",
					}},
				}},
			},
		}
		testenv.MustNotError(t, env.Client.Create(ctx, bd), "creating BundleDeployment")
		// Nothing installed yet: a first install, from the higher-priority
		// serving Catalog of the two its (empty) selector matches.
		r := resolveJSON(t, opts(contentOptions{}), nil, resolveFlags{fromBD: "kube-green"})
		if r.Resolved.Catalog != "mirror" || r.Resolved.Bundle != "kube-green.v0.6.0" || r.Resolved.Edge != resolve.EdgeInitialInstall || r.Installed != nil {
			t.Fatalf("first install: %+v", r)
		}
		bd.Status.ActiveBundle = "kube-green-abc"
		bd.Status.Catalog = &rukpakv1alpha1.CatalogSourceStatus{Installed: &rukpakv1alpha1.CatalogBundle{
			Package: "kube-green", Name: "kube-green.v0.5.0", Version: "0.5.0", Catalog: "mirror",
		}}
		testenv.MustNotError(t, env.Client.Status().Update(ctx, bd), "writing BundleDeployment status")
		r = resolveJSON(t, opts(contentOptions{}), nil, resolveFlags{fromBD: "kube-green"})
		var path []string
		for _, s := range r.UpgradePath {
			path = append(path, s.ToVersion)
		}
		if r.Installed == nil || r.Installed.Name != "kube-green.v0.5.0" || r.Resolved.Bundle != "kube-green.v0.5.1" || r.Resolved.Edge != resolve.EdgeReplaces ||
			strings.Join(path, " ") != "0.5.1 0.5.2 0.6.0" {
			t.Fatalf("from 0.5.0: %+v (path %v)", r, path)
		}
		// Given SOURCEs replace the selected Catalogs.
		r = resolveJSON(t, opts(contentOptions{}), []string{"catalog/community"}, resolveFlags{fromBD: "kube-green"})
		if r.Resolved.Catalog != "community" {
			t.Fatalf("with a SOURCE: %+v", r)
		}
		if err := opts(contentOptions{}).resolve(ctx, &bytes.Buffer{}, nil, resolveFlags{fromBD: "nothere"}); err == nil || !strings.Contains(err.Error(), `reading BundleDeployment "nothere"`) {
			t.Fatalf("missing BundleDeployment: %v", err)
		}
		leftBehind(t)
	})

	t.Run("a Catalog that is not served, or missing", func(t *testing.T) {
		c := &rukpakv1alpha1.Catalog{
			ObjectMeta: metav1.ObjectMeta{Name: "pending"},
			Spec: rukpakv1alpha1.CatalogSpec{Source: rukpakv1alpha1.BundleSource{
				Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: "example.com/pending:latest"},
			}},
		}
		testenv.MustNotError(t, env.Client.Create(ctx, c), "creating Catalog")
		err := opts(contentOptions{}).list(ctx, &bytes.Buffer{}, "catalog/pending", "")
		if err == nil || err.Error() != `catalog "pending" is not served yet: it has no status.contentURL (see its Serving condition)` {
			t.Fatalf("got %v", err)
		}
		err = opts(contentOptions{}).list(ctx, &bytes.Buffer{}, "catalog/nothere", "")
		if err == nil || !strings.Contains(err.Error(), `reading Catalog "nothere"`) || !strings.Contains(err.Error(), "not found") {
			t.Fatalf("got %v", err)
		}
		leftBehind(t)
	})
}
