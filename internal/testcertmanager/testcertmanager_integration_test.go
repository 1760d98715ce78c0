package testcertmanager_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/internal/testcertmanager"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// TestIssuesAndInjects proves the cert-manager the suites run does what
// rukpak's cert-manager overlay relies on: a self-signed CA, a CA Issuer, a
// serving certificate for a Service, and its CA injected into a webhook
// configuration.
func TestIssuesAndInjects(t *testing.T) {
	env := testenv.Start(t)
	user, err := env.Env.AddUser(envtest.User{Name: "cert-manager", Groups: []string{"system:masters"}}, nil)
	testenv.MustNotError(t, err, "adding a user")
	kcfg, err := user.KubeConfig()
	testenv.MustNotError(t, err, "writing a kubeconfig")
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	testenv.MustNotError(t, os.WriteFile(kubeconfig, kcfg, 0o600), "writing %s", kubeconfig)
	testcertmanager.Start(t, testenv.Kubectl(t), kubeconfig)

	ctx := t.Context()
	c := env.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "certs"}}
	testenv.MustNotError(t, c.Create(ctx, ns), "creating namespace")
	for _, doc := range []string{`
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: selfsigned, namespace: certs}
spec: {selfSigned: {}}`, `
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: ca, namespace: certs}
spec:
  isCA: true
  commonName: test-ca
  secretName: ca
  privateKey: {algorithm: ECDSA, size: 256}
  issuerRef: {kind: Issuer, name: selfsigned}`, `
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: ca, namespace: certs}
spec: {ca: {secretName: ca}}`, `
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: serving, namespace: certs}
spec:
  secretName: serving
  dnsNames: [webhook.certs.svc]
  privateKey: {algorithm: ECDSA, size: 256}
  issuerRef: {kind: Issuer, name: ca}`} {
		obj := &unstructured.Unstructured{}
		testenv.MustNotError(t, yaml.Unmarshal([]byte(doc), &obj.Object), "decoding %s", doc)
		testenv.MustNotError(t, c.Create(ctx, obj), "creating %s %s", obj.GetKind(), obj.GetName())
	}
	none := admissionregistrationv1.SideEffectClassNone
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "certs", Annotations: map[string]string{"cert-manager.io/inject-ca-from": "certs/serving"}},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "v.certs.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "certs", Name: "webhook"}},
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			// Matches nothing the test creates.
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"example.com"}, APIVersions: []string{"v1"}, Resources: []string{"widgets"}},
			}},
		}},
	}
	testenv.MustNotError(t, c.Create(ctx, vwc), "creating webhook configuration")

	serving := &corev1.Secret{}
	waitFor(ctx, t, "the serving certificate's Secret", func() (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: "certs", Name: "serving"}, serving)
		return err == nil && len(serving.Data["tls.crt"]) > 0 && len(serving.Data["ca.crt"]) > 0, client.IgnoreNotFound(err)
	})
	ca := &corev1.Secret{}
	testenv.MustNotError(t, c.Get(ctx, client.ObjectKey{Namespace: "certs", Name: "ca"}, ca), "reading the CA Secret")
	if !bytes.Equal(serving.Data["ca.crt"], ca.Data["tls.crt"]) {
		t.Fatalf("serving certificate's ca.crt is not the CA Issuer's certificate")
	}
	waitFor(ctx, t, "the CA bundle injected into the webhook configuration", func() (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(vwc), vwc)
		return err == nil && bytes.Equal(vwc.Webhooks[0].ClientConfig.CABundle, serving.Data["ca.crt"]), err
	})
}

func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, testenv.WaitTimeout, true, func(context.Context) (bool, error) { return cond() }); err != nil {
		t.Fatalf("waiting up to %s for %s: %v", testenv.WaitTimeout, what, err)
	}
}
