package provisioner_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testcertmanager"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// TestIntegrationHelmAdmissionWebhookChart installs the real
// prometheus-operator-admission-webhook chart through the helm class the way
// its README offers for clusters with cert-manager (certManager.enabled,
// jobs off: its hook Jobs' image cannot be pulled here), with cert-manager's
// own controllers running: its Issuers and Certificates are applied, the
// serving certificate issued, and the CA injected into both webhook
// configurations the chart installs.
func TestIntegrationHelmAdmissionWebhookChart(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	testcertmanager.Start(t, testenv.Kubectl(t), h.adminKubeconfig())
	h.createNamespace("monitoring")
	h.createHelmBD("admission", h.pushChartDir("charts/prometheus-operator-admission-webhook", filepath.Join(helmTestdata, "prometheus-operator-admission-webhook")),
		`{"installNamespace":"monitoring","values":"jobs:\n  enabled: false\ncertManager:\n  enabled: true\n"}`)
	h.waitBD("admission", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "Instantiated bundle")

	const name = "admission-prometheus-operator-admission-webhook"
	secret := &corev1.Secret{}
	eventually(t, "cert-manager's serving certificate for the chart's webhook", func() error {
		if err := h.get(secret, "monitoring", name+"-cert"); err != nil {
			return err
		}
		if len(secret.Data["tls.crt"]) == 0 || len(secret.Data["ca.crt"]) == 0 {
			return fmt.Errorf("Secret %s-cert has no tls.crt/ca.crt yet", name)
		}
		return nil
	})
	eventually(t, "the CA injected into the chart's webhook configurations", func() error {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := h.get(vwc, "", name); err != nil {
			return err
		}
		mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := h.get(mwc, "", name); err != nil {
			return err
		}
		for _, b := range [][]byte{vwc.Webhooks[0].ClientConfig.CABundle, mwc.Webhooks[0].ClientConfig.CABundle} {
			if !bytes.Contains(b, bytes.TrimSpace(secret.Data["ca.crt"])) {
				return fmt.Errorf("a webhook configuration's caBundle lacks the chart's CA")
			}
		}
		return nil
	})
	helmCLICheck(t, h, "admission", map[string]string{"get values -o json": `{"certManager":{"enabled":true},"jobs":{"enabled":false}}`})

	if err := h.c.Delete(t.Context(), h.bd("admission")); err != nil {
		t.Fatal(err)
	}
	h.waitGone(&admissionregistrationv1.ValidatingWebhookConfiguration{}, "", name)
	h.waitGone(&admissionregistrationv1.MutatingWebhookConfiguration{}, "", name)
}
