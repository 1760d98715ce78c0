package securemetrics_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/rukpak-dev/rukpak/internal/securemetrics"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testmetrics"
	"github.com/rukpak-dev/rukpak/internal/testnet"
)

// A series only this test's registry holds, so a body holding it came from
// the metrics handler.
var probe = prometheus.NewCounter(prometheus.CounterOpts{Name: "rukpak_securemetrics_test_probe_total", Help: "Test series."})

func init() { ctrlmetrics.Registry.MustRegister(probe) }

// TestMetricsNeedAToken: the metrics endpoint, run as the webhook's shipped
// ClusterRole allows (the provisioner's allows everything), answers plain
// HTTP without metrics (Go's 400), a request without a token with 401, one with a token
// the API server does not know with 500, a ServiceAccount's token without
// the right to get /metrics with 403, and one bound to the shipped
// rukpak-metrics-reader with the metrics.
func TestMetricsNeedAToken(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	ns := "metrics-scrapers"
	testenv.MustNotError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}), "creating namespace")

	// The server's own identity: only the webhook's ClusterRole.
	role := shippedClusterRole(t, filepath.Join("manifests", "base", "webhook", "rbac.yaml"), "rukpak-webhook")
	role.ResourceVersion = ""
	testenv.MustNotError(t, env.Client.Create(ctx, role), "creating ClusterRole %s", role.Name)
	const serverUser = "metrics-server"
	testenv.MustNotError(t, env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: serverUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: serverUser}},
	}), "binding %s", role.Name)
	user, err := env.Env.ControlPlane.AddUser(envtest.User{Name: serverUser}, env.Config)
	testenv.MustNotError(t, err, "adding user %s", serverUser)

	addr := testnet.FreeAddr(t)
	mgr, err := ctrl.NewManager(user.Config(), manager.Options{
		Scheme:                 env.Env.Scheme,
		Metrics:                securemetrics.Options(addr, ""),
		HealthProbeBindAddress: "0",
		Logger:                 logr.Discard(),
	})
	testenv.MustNotError(t, err, "creating manager")
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	probe.Inc()

	reader := testmetrics.Token(t, env.Config, ns, "prometheus", true)
	nobody := testmetrics.Token(t, env.Config, ns, "nobody", false)
	url := "https://" + addr + "/metrics"

	// Up once the reader gets an answer that is not a refused connection.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, body, err := testmetrics.Scrape(ctx, url, reader)
		if err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never answered the reader: %d %q %v", code, truncate(body), err)
		}
		select {
		case err := <-done:
			t.Fatalf("manager exited: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}

	for _, tc := range []struct {
		name, token string
		code        int
		body        string
	}{
		{"no token", "", http.StatusUnauthorized, "Unauthorized"},
		// The API server's TokenReview answers with an error, which
		// controller-runtime's filter reports as its own failure.
		{"unknown token", "not-a-token", http.StatusInternalServerError, "Authentication failed"},
		{"ServiceAccount without the right", nobody, http.StatusForbidden, "Authorization denied for user system:serviceaccount:" + ns + ":nobody"},
		{"ServiceAccount bound to rukpak-metrics-reader", reader, http.StatusOK, "rukpak_securemetrics_test_probe_total 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, err := testmetrics.Scrape(ctx, url, tc.token)
			if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || !strings.Contains(body, tc.body) {
				t.Errorf("GET /metrics: %d %q, want %d and a body holding %q", code, truncate(body), tc.code, tc.body)
			}
			if tc.code != http.StatusOK && strings.Contains(body, "rukpak_securemetrics_test_probe_total") {
				t.Errorf("a refused scrape returned metrics")
			}
		})
	}

	t.Run("plain HTTP", func(t *testing.T) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode != http.StatusBadRequest || bytes.Contains(body, []byte("rukpak_securemetrics_test_probe_total")) {
			t.Errorf("plain HTTP answered %d with %q", resp.StatusCode, truncate(string(body)))
		}
	})
}

func truncate(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// shippedClusterRole reads the ClusterRole name from a manifest file (of
// several documents) of the repository.
func shippedClusterRole(t *testing.T, rel, name string) *rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), rel))
	testenv.MustNotError(t, err, "reading %s", rel)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var cr rbacv1.ClusterRole
		if err := dec.Decode(&cr); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding %s: %v", rel, err)
		}
		if cr.Kind == "ClusterRole" && cr.Name == name {
			return &cr
		}
	}
	t.Fatalf("%s holds no ClusterRole %s", rel, name)
	return nil
}
