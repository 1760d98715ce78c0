package testmetrics

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// ReaderRole is the shipped ClusterRole that may scrape metrics.
const ReaderRole = "rukpak-metrics-reader"

// Token creates the ServiceAccount namespace/name (the namespace must exist)
// and returns a token of it; with bind, the account is bound to ReaderRole,
// created from manifests/base/rbac when the cluster lacks it.
func Token(tb testing.TB, cfg *rest.Config, namespace, name string, bind bool) string {
	tb.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(cfg)
	testenv.MustNotError(tb, err, "building a clientset")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("creating ServiceAccount %s/%s: %v", namespace, name, err)
	}
	if bind {
		path := filepath.Join(testenv.RepoRoot(), "manifests", "base", "rbac", "metrics_reader_clusterrole.yaml")
		data, err := os.ReadFile(path)
		testenv.MustNotError(tb, err, "reading %s", path)
		role := &rbacv1.ClusterRole{}
		testenv.MustNotError(tb, yaml.UnmarshalStrict(data, role), "decoding %s", path)
		if role.Name != ReaderRole {
			tb.Fatalf("%s holds ClusterRole %q, want %s", path, role.Name, ReaderRole)
		}
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			tb.Fatalf("creating ClusterRole %s: %v", ReaderRole, err)
		}
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ReaderRole + "-" + namespace + "-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ReaderRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			tb.Fatalf("creating ClusterRoleBinding %s: %v", crb.Name, err)
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	testenv.MustNotError(tb, err, "creating a token of %s/%s", namespace, name)
	return tr.Status.Token
}

// Scrape GETs url (https://host:port/metrics) with token as a bearer token
// ("" sends none) and returns the status code and body (up to 64 MiB). The
// server's certificate is not verified: the binaries' default one is
// self-signed at start, as kube-controller-manager's.
func Scrape(ctx context.Context, url, token string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := insecureClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, "", fmt.Errorf("reading %s: %w", url, err)
	}
	return resp.StatusCode, string(b), nil
}

var insecureClient = &http.Client{Transport: &http.Transport{
	// A test scrapes a certificate generated at the server's start.
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // test client of a self-signed server
	// Uncompressed: a gzipped answer costs the server a compressor
	// (~1 MB allocated per scrape), which the benchmarks that scrape the
	// provisioner every few seconds would count as its own work.
	DisableCompression: true,
}}
