package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"math/rand/v2"
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/storage"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/upload"
)

// writeBundleDir writes files (name -> content) under a new directory.
func writeBundleDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		testenv.MustNotError(t, os.MkdirAll(filepath.Dir(p), 0o755), "mkdir")
		testenv.MustNotError(t, os.WriteFile(p, []byte(content), 0o644), "writing %s", name)
	}
	return dir
}

// generateBundles creates, for every BundleDeployment, the Bundle of its
// template as the BundleDeployment controller does (its labels, the
// template's spec, the provisioner's finalizer), until ctx ends: the
// controller itself runs in the local e2e suite's TestRukpakctlRun.
func generateBundles(ctx context.Context, t *testing.T, c client.Client) {
	for ctx.Err() == nil {
		bds := &rukpakv1alpha1.BundleDeploymentList{}
		if err := c.List(ctx, bds); err == nil {
			for _, bd := range bds.Items {
				d := bd.Spec.Template.Spec.Source.Upload.Digest
				b := &rukpakv1alpha1.Bundle{
					ObjectMeta: metav1.ObjectMeta{
						Name:       bd.Name + "-" + d[len("sha256:"):len("sha256:")+10],
						Labels:     map[string]string{rukpakv1alpha1.LabelOwnerKind: "BundleDeployment", rukpakv1alpha1.LabelOwnerName: bd.Name},
						Finalizers: []string{rukpakv1alpha1.FinalizerDeleteCachedBundle},
					},
					Spec: bd.Spec.Template.Spec,
				}
				if err := c.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
					t.Errorf("creating Bundle %s: %v", b.Name, err)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestRun runs rukpakctl run against a real API server and the upload
// handler as the provisioner serves it (real TokenReviews and
// SubjectAccessReviews): install, a no-op rerun, a pivot, a ServiceAccount
// without the right refused, a digest other than the pin refused, an
// archive over the limit refused.
func TestRun(t *testing.T) {
	env := testenv.Pooled(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs, err := kubernetes.NewForConfig(env.Config)
	testenv.MustNotError(t, err, "creating clientset")
	const ns = "rukpak-system"
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	testenv.MustNotError(t, err, "creating namespace")
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "manifests", "base", "rbac", "bundle_uploader_clusterrole.yaml"))
	testenv.MustNotError(t, err, "reading the bundle-uploader ClusterRole")
	var role rbacv1.ClusterRole
	testenv.MustNotError(t, yaml.UnmarshalStrict(raw, &role), "decoding the bundle-uploader ClusterRole")
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{})
	testenv.MustNotError(t, err, "creating the bundle-uploader ClusterRole")

	store, err := upload.NewStore(t.TempDir(), unpack.Limits{MaxFetchBytes: 256 << 10})
	testenv.MustNotError(t, err, "creating store")
	authn, authz, err := storage.NewDelegatingAuth(env.Config, nil)
	testenv.MustNotError(t, err, "creating auth")
	h := upload.NewHandler(upload.Handler{
		Store: store, Authn: authn, Authz: authz,
		GetBundle: func(ctx context.Context, name string) (*rukpakv1alpha1.Bundle, error) {
			b := &rukpakv1alpha1.Bundle{}
			return b, env.Client.Get(ctx, client.ObjectKey{Name: name}, b)
		},
		Scratch: t.TempDir(),
		Log:     testr.New(t),
	}, 2)
	mux := http.NewServeMux()
	mux.Handle(upload.Path, h)
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	testenv.MustNotError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600), "writing CA")
	go generateBundles(ctx, t, env.Client)

	run := func(dir string, o runOptions) (string, error) {
		var out bytes.Buffer
		o.config, o.namespace, o.caFile, o.contentURL = env.Config, ns, caFile, srv.URL
		o.bdClass, o.bundleClass, o.timeout = rukpakv1alpha1.ProvisionerClassPlain, rukpakv1alpha1.ProvisionerClassPlain, testenv.WaitTimeout
		err := o.run(ctx, &out, "demo", dir)
		return out.String(), err
	}
	uploaded := func(t *testing.T, out string) *rukpakv1alpha1.Bundle {
		t.Helper()
		_, rest, ok := strings.Cut(out, `successfully uploaded bundle content for "`)
		name, _, ok2 := strings.Cut(rest, `"`)
		if !ok || !ok2 {
			t.Fatalf("no upload line in %q", out)
		}
		b := &rukpakv1alpha1.Bundle{}
		testenv.MustNotError(t, env.Client.Get(ctx, client.ObjectKey{Name: name}, b), "reading Bundle %s", name)
		if !store.Has(b.UID) {
			t.Fatalf("Bundle %s's upload is not stored", name)
		}
		return b
	}
	v1 := writeBundleDir(t, map[string]string{"manifests/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: default\n"})
	v2 := writeBundleDir(t, map[string]string{"manifests/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: default\n"})

	var first *rukpakv1alpha1.Bundle
	t.Run("install", func(t *testing.T) {
		out, err := run(v1, runOptions{})
		testenv.MustNotError(t, err, "rukpakctl run")
		if !strings.HasPrefix(out, "bundledeployment.core.rukpak.io \"demo\" applied\n") {
			t.Fatalf("output %q", out)
		}
		first = uploaded(t, out)
		bd := &rukpakv1alpha1.BundleDeployment{}
		testenv.MustNotError(t, env.Client.Get(ctx, client.ObjectKey{Name: "demo"}, bd), "reading BundleDeployment")
		if d := bd.Spec.Template.Spec.Source.Upload.Digest; d != first.Spec.Source.Upload.Digest || !strings.HasPrefix(d, "sha256:") {
			t.Fatalf("template pins %q", d)
		}
	})
	t.Run("the same directory again changes nothing", func(t *testing.T) {
		out, err := run(v1, runOptions{})
		testenv.MustNotError(t, err, "rukpakctl run")
		if want := "bundle \"" + first.Name + "\" is already up-to-date\n"; !strings.HasSuffix(out, want) {
			t.Fatalf("output %q, want %q", out, want)
		}
	})
	t.Run("a ServiceAccount without the right is refused", func(t *testing.T) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "stranger", Namespace: ns}}, metav1.CreateOptions{})
		testenv.MustNotError(t, err, "creating service account")
		_, err = run(v2, runOptions{contentOptions: contentOptions{serviceAccount: ns + "/stranger"}})
		if err == nil || !strings.Contains(err.Error(), `403 Forbidden: user "system:serviceaccount:rukpak-system:stranger" cannot create resource "bundles/upload"`) {
			t.Fatalf("got %v, want the upload service's 403", err)
		}
	})
	t.Run("changed content pivots to a new Bundle", func(t *testing.T) {
		out, err := run(v2, runOptions{})
		testenv.MustNotError(t, err, "rukpakctl run")
		if second := uploaded(t, out); second.Name == first.Name {
			t.Fatalf("uploaded to the first Bundle again: %q", out)
		}
	})
	t.Run("a digest other than the pin is refused", func(t *testing.T) {
		path, _, err := archiveDir(ctx, v2, unpack.DefaultLimits)
		testenv.MustNotError(t, err, "archiving")
		defer os.Remove(path)
		token, cleanup, err := contentOptions{namespace: ns}.token(ctx, cs, bundleUploaderRole, "test-")
		testenv.MustNotError(t, err, "token")
		defer cleanup()
		o := contentOptions{config: env.Config, namespace: ns, caFile: caFile}
		hc, err := o.httpClient(ctx, cs)
		testenv.MustNotError(t, err, "client")
		_, err = putArchive(ctx, hc, srv.URL+upload.Path+first.Name+".tgz", token, path)
		if err == nil || !strings.Contains(err.Error(), "409 Conflict: the upload has digest") || !strings.Contains(err.Error(), "pins "+first.Spec.Source.Upload.Digest) {
			t.Fatalf("got %v, want 409 naming the pin", err)
		}
	})
	t.Run("an archive over the limit is refused", func(t *testing.T) {
		noise := make([]byte, 300<<10)
		_, _ = rand.NewChaCha8([32]byte{}).Read(noise)
		big := writeBundleDir(t, map[string]string{"manifests/cm.yaml": "kind: ConfigMap\n", "noise": string(noise)})
		_, err := run(big, runOptions{})
		if err == nil || !strings.Contains(err.Error(), "413 Request Entity Too Large: the upload declares") {
			t.Fatalf("got %v, want 413", err)
		}
	})
}
