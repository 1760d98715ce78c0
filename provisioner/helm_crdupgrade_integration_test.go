package provisioner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
)

// gizmoChart writes a chart whose templates/ hold the gizmo CRD with the
// enum of .Values.modes, and whose crds/ hold a CRD Helm never updates.
func gizmoChart(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	crd := strings.Replace(gizmoCRD("MODES", 100), "[MODES]", "[{{ .Values.modes }}]", 1)
	files := map[string]string{
		"Chart.yaml":         "apiVersion: v2\nname: gizmos\nversion: 0.1.0\n",
		"values.yaml":        "modes: a, b\n",
		"templates/crd.yaml": crd,
		// Helm creates crds/ when missing and never updates them: not
		// checked, whatever the upgrade.
		"crds/widgets.yaml": strings.NewReplacer("gizmos", "widgets", "gizmo", "widget", "Gizmo", "Widget", "[MODES]", "[x]").Replace(gizmoCRD("MODES", 1)),
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A chart upgrade whose templates/ CRD would break existing objects is
// refused before Helm runs it, as for the plain class: the deployed
// revision stays and the old schema serves; with the objects fixed, the
// upgrade proceeds.
func TestIntegrationHelmCRDUpgradePreflight(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.createHelmBD("hgizmos", h.pushChartDir("charts/gizmos", gizmoChart(t)), `{"installNamespace":"default"}`)
	active := h.waitBD("hgizmos", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "").Status.ActiveBundle
	h.createGizmos()

	h.setConfig("hgizmos", `{"installNamespace":"default","values":"modes: a\n"}`)
	bd := h.waitBD("hgizmos", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonUpgradePreflightFailed, "")
	unsupported := `(spec.mode: Unsupported value: "b": supported values: "a")`
	want := `CRD upgrade preflight failed: CRD gizmos.example.com: EnumNarrowed in v1 spec.mode: enum values removed: "b"; 3 existing objects affected: ` +
		`default/g2 ` + unsupported + `, default/g3 ` + unsupported + `, default/g4 ` + unsupported + fmt.Sprintf(`. Bundle %q was not installed`, active)
	if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled); c.Message != want {
		t.Errorf("message:\n got %s\nwant %s", c.Message, want)
	}
	h.waitHistory("hgizmos", h.stockHistory, "1:deployed")
	if got := h.liveModes(); fmt.Sprint(got) != `["a" "b"]` {
		t.Errorf("CRD on the cluster allows modes %v, want the old a and b", got)
	}

	for _, name := range []string{"g2", "g3", "g4"} {
		g := h.gizmo(name)
		if err := unstructured.SetNestedField(g.Object, "a", "spec", "mode"); err != nil {
			t.Fatal(err)
		}
		if err := h.c.Update(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	h.updateBD("hgizmos", func(bd *rukpakv1alpha1.BundleDeployment) {
		metav1.SetMetaDataAnnotation(&bd.ObjectMeta, rukpakv1alpha1.AnnotationReconcileRequestedAt, "fixed")
	})
	h.waitHistory("hgizmos", h.stockHistory, "1:superseded", "2:deployed")
	h.waitBD("hgizmos", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	if got := h.liveModes(); fmt.Sprint(got) != `["a"]` {
		t.Errorf("CRD on the cluster allows modes %v after the upgrade, want a", got)
	}
	widgets := &apiextensionsv1.CustomResourceDefinition{}
	if err := h.get(widgets, "", "widgets.example.com"); err != nil {
		t.Errorf("crds/ CRD: %v", err)
	}
}
