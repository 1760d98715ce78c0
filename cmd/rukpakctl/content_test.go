package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/storage"
)

// TestContent runs rukpakctl content against a real API server and the
// content handler as the provisioner serves it: it lists the stored files
// as tar -tv does, through a temporary ServiceAccount it removes after,
// and a user who may not create that ServiceAccount is told what to do.
func TestContent(t *testing.T) {
	env := testenv.Pooled(t)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	testenv.MustNotError(t, err, "creating clientset")
	const ns = "rukpak-system"
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	testenv.MustNotError(t, err, "creating namespace")
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "manifests", "base", "rbac", "bundle_reader_clusterrole.yaml"))
	testenv.MustNotError(t, err, "reading the bundle-reader ClusterRole")
	var role rbacv1.ClusterRole
	testenv.MustNotError(t, yaml.UnmarshalStrict(raw, &role), "decoding the bundle-reader ClusterRole")
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{})
	testenv.MustNotError(t, err, "creating the bundle-reader ClusterRole")

	// Content stored and served as the provisioner does.
	store := &storage.LocalDirectory{RootDirectory: t.TempDir()}
	b := &rukpakv1alpha1.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "combo"},
		Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Source: rukpakv1alpha1.BundleSource{
			Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: "example.com/combo@sha256:" + strings.Repeat("0", 64)},
		}},
	}
	content := fstest.MapFS{
		"manifests/deployment.yaml": {Data: []byte("kind: Deployment\n")},
		"manifests/ns.yaml":         {Data: []byte("kind: Namespace\n")},
	}
	testenv.MustNotError(t, store.Store(ctx, b, content), "storing content")
	digest, err := store.Digest(ctx, b)
	testenv.MustNotError(t, err, "digest")
	handler, err := storage.NewHandler(env.Config, store.RootDirectory, nil, testr.New(t))
	testenv.MustNotError(t, err, "creating handler")
	mux := http.NewServeMux()
	mux.Handle(storage.BundlesPath, handler)
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	testenv.MustNotError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600), "writing CA")

	testenv.MustNotError(t, env.Client.Create(ctx, b), "creating Bundle")
	b.Status = rukpakv1alpha1.BundleStatus{Phase: rukpakv1alpha1.PhaseUnpacked, ContentURL: srv.URL + storage.BundlesPath + "combo.tgz", ContentDigest: digest}
	testenv.MustNotError(t, env.Client.Status().Update(ctx, b), "writing Bundle status")

	run := func(cfg *rest.Config, o contentOptions) (string, error) {
		var out bytes.Buffer
		o.config, o.namespace, o.caFile = cfg, ns, caFile
		err := o.run(ctx, &out, "combo")
		return out.String(), err
	}

	t.Run("lists the files through a temporary ServiceAccount", func(t *testing.T) {
		out, err := run(env.Config, contentOptions{})
		testenv.MustNotError(t, err, "rukpakctl content")
		var names []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) != 6 || f[1] != "0/0" {
				t.Fatalf("line %q is not mode, owner, size, date, time and name", line)
			}
			names = append(names, f[5])
		}
		if want := []string{"manifests/", "manifests/deployment.yaml", "manifests/ns.yaml"}; strings.Join(names, " ") != strings.Join(want, " ") {
			t.Fatalf("listed %q, want %q\n%s", names, want, out)
		}
		if !strings.Contains(out, "-rw-r--r-- 0/0        17 ") {
			t.Errorf("deployment.yaml's line lacks its mode and size:\n%s", out)
		}
		crbs, err := cs.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=rukpakctl"})
		testenv.MustNotError(t, err, "listing bindings")
		sas, err := cs.CoreV1().ServiceAccounts(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=rukpakctl"})
		testenv.MustNotError(t, err, "listing service accounts")
		if len(crbs.Items) != 0 || len(sas.Items) != 0 {
			t.Fatalf("left %d bindings and %d service accounts behind", len(crbs.Items), len(sas.Items))
		}
	})

	t.Run("a ServiceAccount without bundle-reader is refused by the content service", func(t *testing.T) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "stranger", Namespace: ns}}, metav1.CreateOptions{})
		testenv.MustNotError(t, err, "creating service account")
		_, err = run(env.Config, contentOptions{serviceAccount: ns + "/stranger"})
		if err == nil || !strings.Contains(err.Error(), "403 Forbidden") {
			t.Fatalf("got %v, want the content service's 403", err)
		}
	})

	t.Run("a user without the rights to a temporary ServiceAccount is told what to do", func(t *testing.T) {
		user := rest.CopyConfig(env.Config)
		user.Impersonate = rest.ImpersonationConfig{UserName: "viewer"}
		_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "viewer-bundles"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "viewer-bundles"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "viewer"}},
		}, metav1.CreateOptions{})
		testenv.MustNotError(t, err, "binding viewer")
		_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "viewer-bundles"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{rukpakv1alpha1.GroupVersion.Group}, Resources: []string{"bundles"}, Verbs: []string{"get"}}},
		}, metav1.CreateOptions{})
		testenv.MustNotError(t, err, "creating viewer role")
		_, err = run(user, contentOptions{})
		if err == nil || !strings.Contains(err.Error(), "or pass --service-account") || !strings.Contains(err.Error(), "forbidden") {
			t.Fatalf("got %v, want a refused binding with the way out", err)
		}
	})

	t.Run("a bundle that is not unpacked", func(t *testing.T) {
		other := b.DeepCopy()
		other.ObjectMeta = metav1.ObjectMeta{Name: "pending"}
		other.Status = rukpakv1alpha1.BundleStatus{}
		testenv.MustNotError(t, env.Client.Create(ctx, other), "creating Bundle")
		var out bytes.Buffer
		err := contentOptions{config: env.Config, namespace: ns, caFile: caFile}.run(ctx, &out, "pending")
		if err == nil || err.Error() != `bundle "pending" has no content URL: it is not unpacked (phase "")` {
			t.Fatalf("got %v", err)
		}
	})
}
