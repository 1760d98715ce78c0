package webhook_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"net"
	"strconv"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/webhook"
	"github.com/rukpak-dev/rukpak/webhook/certs"
)

// TestSelfManagedRotation runs the webhook with self-managed certificates of
// ten seconds' validity: the served certificate changes several times, the
// CA injected into the configuration keeps verifying it (as of when it was
// served: a busy machine may take seconds to read the configuration), and
// admission requests through the API server keep being answered.
func TestSelfManagedRotation(t *testing.T) {
	// The API server reaches the webhook as "localhost", the serving
	// certificate's DNS name; the server itself listens on 127.0.0.1.
	env := startEnv(t, "localhost")
	certDir := t.TempDir()
	runWebhook(t, env, webhook.Config{
		CertMode: webhook.CertModeSelf,
		Server:   webhook.ServerOptions{CertDir: certDir},
		Certs: certs.Options{
			Namespace:             bundleNamespace,
			DNSName:               "localhost",
			WebhookConfigurations: []string{webhook.DefaultConfigurationName},
			ServerValidity:        10 * time.Second,
			RenewBefore:           5 * time.Second,
			CheckInterval:         500 * time.Millisecond,
			ControllerName:        "cert-rotator-" + strconv.FormatInt(time.Now().UnixNano(), 36), // unique per run (-count)
		},
	})
	ctx := context.Background()
	c := env.Client
	wio := env.Env.WebhookInstallOptions
	addr := net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))

	seen := map[[32]byte]bool{}
	deadline := time.Now().Add(testenv.WaitTimeout)
	for i := 0; len(seen) < 3; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("saw %d served certificates in %s, want 3", len(seen), testenv.WaitTimeout)
		}
		servedAt := time.Now()
		leaf := servedCert(t, addr)
		seen[sha256.Sum256(leaf.Raw)] = true
		verifyAgainstInjectedCA(t, c, leaf, servedAt)

		// A request through the API server must reach the webhook and be
		// answered: a create is admitted, a spec change denied by it.
		b := comboTagRef()
		b.Name = "rotation-" + strconv.Itoa(i)
		testenv.MustNotError(t, c.Create(ctx, b), "create %d (certificate %d)", i, len(seen))
		err := c.Patch(ctx, b, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"provisionerClassName":"other"}}`)))
		if apierrors.ReasonForError(err) != webhook.SpecImmutable {
			t.Fatalf("patch %d (certificate %d): got %v, want the immutability denial", i, len(seen), err)
		}
		time.Sleep(200 * time.Millisecond) // pace the probe; the rotation itself is what we wait for
	}

	var s corev1.Secret
	testenv.MustNotError(t, c.Get(ctx, types.NamespacedName{Namespace: bundleNamespace, Name: certs.DefaultSecretName}, &s), "getting certificate Secret")
	if len(s.Data["ca.crt"]) == 0 || len(s.Data["ca.key"]) == 0 {
		t.Fatalf("Secret %s lacks the CA", certs.DefaultSecretName)
	}
}

func servedCert(t *testing.T, addr string) *x509.Certificate {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // verified against the injected CA below
	testenv.MustNotError(t, err, "dialing %s", addr)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

// verifyAgainstInjectedCA verifies leaf, served at servedAt, against every
// caBundle of the webhook configuration.
func verifyAgainstInjectedCA(t *testing.T, c client.Client, leaf *x509.Certificate, servedAt time.Time) {
	t.Helper()
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	testenv.MustNotError(t, c.Get(context.Background(), types.NamespacedName{Name: webhook.DefaultConfigurationName}, &vwc), "getting webhook configuration")
	if len(vwc.Webhooks) != 4 {
		t.Fatalf("webhook configuration has %d webhooks, want 4 (Bundles, Catalogs, BundleDeployments, CRDs)", len(vwc.Webhooks))
	}
	for _, wh := range vwc.Webhooks {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(wh.ClientConfig.CABundle) {
			t.Fatalf("webhook %s has no usable caBundle", wh.Name)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost", CurrentTime: servedAt}); err != nil {
			t.Fatalf("served certificate does not verify against %s's caBundle: %v", wh.Name, err)
		}
	}
}
