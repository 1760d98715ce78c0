package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/webhook"
)

const bundleNamespace = "rukpak-system"

// provisionerSA is the provisioner's ServiceAccount in the shipped
// manifests, the webhook's --provisioner-service-account.
var provisionerSA = webhook.ServiceAccount{Namespace: bundleNamespace, Name: "rukpak-provisioner"}

// lockedBuffer collects the manager's logs; they are printed when a test
// fails.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startEnv starts an API server with the shipped ValidatingWebhookConfiguration
// pointed at a local server on 127.0.0.1; externalName, when set, is the host
// name the API server uses to reach it.
func startEnv(t *testing.T, externalName string) *testenv.Env {
	t.Helper()
	env := testenv.Start(t, testenv.Options{Webhooks: envtest.WebhookInstallOptions{
		Paths:                        []string{filepath.Join(testenv.RepoRoot(), "manifests", "base", "webhook", "validatingwebhookconfiguration.yaml")},
		LocalServingHost:             "127.0.0.1",
		LocalServingHostExternalName: externalName,
	}})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bundleNamespace}}
	testenv.MustNotError(t, env.Client.Create(context.Background(), ns), "creating namespace")
	return env
}

// runWebhook runs the real webhook wiring against env until the test ends
// (or stop is called) and waits until it serves TLS.
func runWebhook(t *testing.T, env *testenv.Env, cfg webhook.Config) (stop func()) {
	t.Helper()
	return runWebhookAs(t, env, env.Config, cfg)
}

// runWebhookAs is runWebhook with the webhook's API requests made with
// restCfg (its own ServiceAccount's rights, say).
func runWebhookAs(t *testing.T, env *testenv.Env, restCfg *rest.Config, cfg webhook.Config) (stop func()) {
	t.Helper()
	logs := &lockedBuffer{}
	ctrl.SetLogger(zap.New(zap.WriteTo(logs), zap.UseDevMode(true)))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("webhook logs:\n%s", logs.String())
		}
	})

	wio := env.Env.WebhookInstallOptions
	cfg.Server.Host = wio.LocalServingHost
	cfg.Server.Port = wio.LocalServingPort
	cfg.BundleNamespace = bundleNamespace

	if cfg.Delegation.Provisioner == (webhook.ServiceAccount{}) {
		cfg.Delegation.Provisioner = provisionerSA
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 env.Env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	testenv.MustNotError(t, err, "creating manager")
	ctx, cancel := context.WithCancel(context.Background())
	testenv.MustNotError(t, webhook.SetupWithManager(ctx, mgr, cfg), "setting up webhook")
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager stopped with error: %v", err)
			}
		})
	}
	t.Cleanup(stop)

	addr := net.JoinHostPort(cfg.Server.Host, strconv.Itoa(cfg.Server.Port))
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		select {
		case err := <-done:
			done <- err // for stop
			return false, fmt.Errorf("manager stopped: %w", err)
		default:
		}
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only probing that TLS is served
		if err != nil {
			return false, nil
		}
		return true, conn.Close()
	})
	testenv.MustNotError(t, err, "waiting for the webhook server on %s", addr)
	return stop
}
