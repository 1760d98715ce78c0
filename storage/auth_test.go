package storage

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// serviceAccountToken creates a ServiceAccount (unless it exists) and gets a
// token for it from the TokenRequest API, as a pod's projected token would
// be; no audiences means the API server's own.
func serviceAccountToken(t *testing.T, cs kubernetes.Interface, name string, audiences ...string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	_, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		testenv.MustNotError(t, err, "creating service account %s", name)
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences}}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, req, metav1.CreateOptions{})
	testenv.MustNotError(t, err, "requesting a token for %s", name)
	return tr.Status.Token
}

// grantBundleReader installs the shipped bundle-reader ClusterRole and
// binds it to the service account.
func grantBundleReader(t *testing.T, cs kubernetes.Interface, serviceAccount string) {
	t.Helper()
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "manifests", "base", "rbac", "bundle_reader_clusterrole.yaml"))
	testenv.MustNotError(t, err, "reading the bundle-reader ClusterRole")
	var role rbacv1.ClusterRole
	testenv.MustNotError(t, yaml.UnmarshalStrict(raw, &role), "decoding the bundle-reader ClusterRole")
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{})
	testenv.MustNotError(t, err, "creating the bundle-reader ClusterRole")
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bundle-reader-" + serviceAccount},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: serviceAccount, Namespace: "default"}},
	}, metav1.CreateOptions{})
	testenv.MustNotError(t, err, "binding bundle-reader")
}

func TestHandlerAgainstAPIServer(t *testing.T) {
	env := testenv.Start(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	testenv.MustNotError(t, err, "creating clientset")
	readerToken := serviceAccountToken(t, cs, "reader", DefaultContentAudience)
	readerAPIToken := serviceAccountToken(t, cs, "reader")
	strangerToken := serviceAccountToken(t, cs, "stranger", DefaultContentAudience)
	grantBundleReader(t, cs, "reader")

	dir, good := contentDir(t)
	h, err := NewHandler(env.Config, dir, nil, testr.New(t))
	testenv.MustNotError(t, err, "creating handler")
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	client := srv.Client()

	get := func(t *testing.T, path, token string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		testenv.MustNotError(t, err, "building request")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		testenv.MustNotError(t, err, "GET %s", path)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		testenv.MustNotError(t, err, "reading body of %s", path)
		return resp.StatusCode, body
	}

	tests := []struct {
		name, token string
		wantStatus  int
	}{
		{name: "no token", wantStatus: http.StatusUnauthorized},
		{name: "garbage token", token: "not-a-real-token", wantStatus: http.StatusUnauthorized},
		{name: "valid token without the role", token: strangerToken, wantStatus: http.StatusForbidden},
		{name: "API server audience token with bundle-reader", token: readerAPIToken, wantStatus: http.StatusUnauthorized},
		{name: "valid token with bundle-reader", token: readerToken, wantStatus: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := get(t, "/bundles/good.tgz", tt.token)
			if status != tt.wantStatus {
				t.Fatalf("status %d, want %d (body %q)", status, tt.wantStatus, body)
			}
			if status == http.StatusOK && string(body) != string(good) {
				t.Fatalf("served %d bytes, want the %d bytes of good.tgz", len(body), len(good))
			}
			if status != http.StatusOK && strings.Contains(string(body), string(good[:10])) {
				t.Fatal("refused request still got content")
			}
		})
	}

	t.Run("traversal by an authorised client", func(t *testing.T) {
		for _, p := range traversalPaths {
			if p == "/bundles" || !strings.HasPrefix(p, "/bundles/") {
				continue // outside /bundles/*: the role does not cover it
			}
			if status, body := get(t, p, readerToken); status != http.StatusNotFound {
				t.Errorf("GET %s: status %d, want 404 (body %q)", p, status, body)
			}
		}
	})
	t.Run("outside /bundles/* is forbidden", func(t *testing.T) {
		for _, p := range []string{"/bundles", "/good.tgz", "/other/good.tgz"} {
			if status, _ := get(t, p, readerToken); status != http.StatusForbidden {
				t.Errorf("GET %s: status %d, want 403", p, status)
			}
		}
	})

	t.Run("fallback loader downloads over TLS", func(t *testing.T) {
		ctx := context.Background()
		caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
		httpClient, err := NewHTTPClient(caPEM)
		testenv.MustNotError(t, err, "creating HTTP client")
		local := &LocalDirectory{RootDirectory: t.TempDir()}
		b := bundle("good")
		b.Status.ContentDigest = digestOf(good)

		tokenFile := filepath.Join(t.TempDir(), "token")
		testenv.MustNotError(t, os.WriteFile(tokenFile, []byte(readerToken+"\n"), 0o600), "writing token")
		newLoader := func(token func() (string, error)) *FallbackLoader {
			l, err := NewFallbackLoader(local, srv.URL, httpClient, token)
			testenv.MustNotError(t, err, "creating loader")
			l.Audience = DefaultContentAudience
			return l
		}
		fsys, err := newLoader(TokenFromFile(tokenFile)).Load(ctx, b)
		testenv.MustNotError(t, err, "loading through the fallback")
		assertSameContent(t, nested(), fsys)

		stranger := newLoader(func() (string, error) { return strangerToken, nil })
		if _, err := stranger.Load(ctx, b); err == nil || !strings.Contains(err.Error(), "403 Forbidden") {
			t.Fatalf("download without the role: got %v, want a 403 error", err)
		}
		apiToken := newLoader(func() (string, error) { return readerAPIToken, nil })
		if _, err := apiToken.Load(ctx, b); err == nil || !strings.Contains(err.Error(), "refusing to send the bearer token") {
			t.Fatalf("download with the API server token: got %v, want it refused before sending", err)
		}
		anonymous := newLoader(nil)
		if _, err := anonymous.Load(ctx, b); err == nil || !strings.Contains(err.Error(), "401 Unauthorized") {
			t.Fatalf("download without a token: got %v, want a 401 error", err)
		}
		// Once stored locally, the local copy wins: the server is not asked.
		other := fstestContent("kind: Local\n")
		testenv.MustNotError(t, local.Store(ctx, b, other), "storing locally")
		fsys, err = stranger.Load(ctx, b)
		testenv.MustNotError(t, err, "loading the local copy")
		assertSameContent(t, other, fsys)
		if _, err := local.Load(ctx, bundle("missing")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("local Load of missing content: %v", err)
		}
	})

	// Decisions are not cached: a revoked binding stops working on the
	// next request.
	t.Run("revoked permission stops working at once", func(t *testing.T) {
		if status, _ := get(t, "/bundles/good.tgz", readerToken); status != http.StatusOK {
			t.Fatalf("before revoking: status %d", status)
		}
		err := cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), "bundle-reader-reader", metav1.DeleteOptions{})
		testenv.MustNotError(t, err, "revoking bundle-reader")
		// The API server's RBAC authorizer reads an informer: allow it to
		// catch up, far less than the minute the old cache held decisions.
		deadline := time.Now().Add(5 * time.Second)
		for {
			status, _ := get(t, "/bundles/good.tgz", readerToken)
			if status == http.StatusForbidden {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("5 s after revoking: status %d, want 403", status)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
