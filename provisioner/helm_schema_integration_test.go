package provisioner_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/heapwatch"
)

// schemaChartFiles is a chart "schemas" whose values.schema.json is schema,
// with a template that writes .Values.replicas into a ConfigMap.
func schemaChartFiles(schema string, more map[string]string) map[string]string {
	files := map[string]string{
		"Chart.yaml":         "apiVersion: v2\nname: schemas\nversion: 1.0.0\n",
		"values.yaml":        "replicas: 1\n",
		"values.schema.json": schema,
		"templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: replicas\ndata:\n  replicas: {{ .Values.replicas | quote }}\n",
	}
	for k, v := range more {
		files[k] = v
	}
	return files
}

// TestIntegrationHelmSchemaRemoteRef: a chart whose values.schema.json
// $refs an http URL (a 24 MiB document) is refused with Installed=False
// naming the reference; neither the render child nor Helm's action in the
// provisioner ever asks the server, and the provisioner's heap does not
// grow by what it serves. A file: reference is refused alike, its file
// never read.
func TestIntegrationHelmSchemaRemoteRef(t *testing.T) {
	// Not parallel: it measures this process's heap.
	big := []byte(`{"description": "` + strings.Repeat("x", 24<<20) + `"}`)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write(big)
	}))
	defer srv.Close()
	ref := srv.URL + "/values.schema.json"

	h := newHarness(t)
	h.createNamespace("schema-remote")
	stop := heapwatch.Start()
	h.createHelmBD("schema-remote", h.pushBundle("schema-remote", schemaChartFiles(`{"properties": {"replicas": {"$ref": "`+ref+`"}}}`, nil)),
		`{"installNamespace":"schema-remote"}`)
	h.waitBDExact("schema-remote", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInstallFailed,
		`installing release "schema-remote": values.schema.json of chart "schemas": $ref "`+ref+`" refused: not a file of the chart (a schema may reference only files of its chart, without network or filesystem access)`)
	growth := stop()
	t.Logf("live heap growth while refusing the chart: %.1f MiB", float64(growth)/(1<<20))
	if n := hits.Load(); n != 0 {
		t.Errorf("the schema's server was asked %d times", n)
	}
	if growth > 64<<20 {
		t.Errorf("live heap grew by %.1f MiB, want at most 64 MiB", float64(growth)/(1<<20))
	}

	// The machine's files are not the chart's: never read, whether there
	// or not.
	if _, err := os.Stat("/etc/hostname"); err == nil {
		h.createNamespace("schema-file")
		h.createHelmBD("schema-file", h.pushBundle("schema-file", schemaChartFiles(`{"properties": {"replicas": {"$ref": "file:///etc/hostname"}}}`, nil)),
			`{"installNamespace":"schema-file"}`)
		h.waitBDExact("schema-file", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInstallFailed,
			`installing release "schema-file": values.schema.json of chart "schemas": $ref "file:///etc/hostname" refused: chart "schemas" has no file "etc/hostname" (a schema may reference only files of its chart, without network or filesystem access)`)
	}
}

// TestIntegrationHelmSchemaLocalRef: a schema's relative $ref to a file of
// the chart works: valid values install, values it refuses fail the
// install and an upgrade with Helm's message, and are not installed.
func TestIntegrationHelmSchemaLocalRef(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.createNamespace("schema-local")
	src := h.pushBundle("schema-local", schemaChartFiles(`{"properties": {"replicas": {"$ref": "schemas/defs.json#/definitions/replicas"}}}`,
		map[string]string{"schemas/defs.json": `{"definitions": {"replicas": {"type": "integer", "maximum": 5}}}`}))
	const refused = "values don't meet the specifications of the schema(s) in the following chart(s):\nschemas:\n- at '/replicas': maximum: got 9, want 5\n"

	// Refused at install, as Helm would.
	h.createHelmBD("schema-local", src, `{"installNamespace":"schema-local","values":"replicas: 9\n"}`)
	h.waitBDExact("schema-local", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInstallFailed,
		`installing release "schema-local": `+refused)

	h.setConfig("schema-local", `{"installNamespace":"schema-local","values":"replicas: 3\n"}`)
	h.waitBD("schema-local", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "Instantiated bundle")
	cm := &corev1.ConfigMap{}
	if err := h.get(cm, "schema-local", "replicas"); err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["replicas"]; got != "3" {
		t.Errorf("ConfigMap replicas holds %q, want 3", got)
	}

	// Refused at upgrade; the installed release stays.
	h.setConfig("schema-local", `{"installNamespace":"schema-local","values":"replicas: 9\n"}`)
	h.waitBDExact("schema-local", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonUpgradeFailed,
		`upgrading release "schema-local": `+refused)
	if err := h.get(cm, "schema-local", "replicas"); err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["replicas"]; got != "3" {
		t.Errorf("after the refused upgrade, ConfigMap replicas holds %q, want 3", got)
	}
}
