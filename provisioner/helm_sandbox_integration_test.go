package provisioner_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// TestIntegrationHelmBoundedRender: a chart whose templates allocate
// without bound is refused with Installed=False naming the memory limit,
// the provisioner unharmed (its templates run in helm.Freeze's child
// process), and not rendered again while its inputs stay; a chart whose
// values change the rendering within the limit installs next to it.
func TestIntegrationHelmBoundedRender(t *testing.T) {
	t.Parallel()
	// Retries a second apart: the test waits for two of them.
	h := backoffHarness(t, time.Second, 2*time.Second)
	h.createNamespace("hostile")
	h.createHelmBD("hostile", h.pushBundle("hostile-chart", map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: hostile\nversion: 1.0.0\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  x: {{ repeat (int .Values.size) \"x\" | quote }}\n",
		"values.yaml":       "size: 4000000000\n",
	}), `{"installNamespace":"hostile"}`)
	h.waitBDExact("hostile", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInstallFailed,
		`installing release "hostile": rendering chart "hostile" exceeded the memory limit of 512 MiB`)
	// Retried (backing off), the same inputs are not rendered again: the
	// refused render is kept (install.renders).
	h.waitAttempts("hostile", 2)
	checkRenders(t, "hostile", "failure 1")

	h.setConfig("hostile", `{"installNamespace":"hostile","values":"size: 10\n"}`)
	h.waitBD("hostile", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "Instantiated bundle")
	cm := &corev1.ConfigMap{}
	if err := h.get(cm, "hostile", "big"); err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["x"]; got != "xxxxxxxxxx" {
		t.Errorf("ConfigMap big holds %q, want 10 x", got)
	}
	checkRenders(t, "hostile", "failure 1", "success 1")
}
