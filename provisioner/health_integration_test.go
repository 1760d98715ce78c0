package provisioner_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
)

// waitBDExact waits for a condition with exactly this message.
func (h *harness) waitBDExact(name, typ string, status metav1.ConditionStatus, reason, msg string) *rukpakv1alpha1.BundleDeployment {
	h.t.Helper()
	bd := h.waitBD(name, typ, status, reason, msg)
	if c := conditions.Get(bd.Status.Conditions, typ); withoutRetry(c.Message) != msg {
		h.t.Fatalf("%s message = %q, want %q", typ, c.Message, msg)
	}
	return bd
}

// A custom resource following the Kubernetes status conventions counts
// towards Healthy: Ready=False makes the BundleDeployment unhealthy, naming
// the object and its reason.
func TestIntegrationHealthOfCustomResources(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()

	crd := widgetCRD + "    subresources:\n      status: {}\n"
	cr := "apiVersion: widgets.example.com/v1\nkind: Widget\nmetadata:\n  name: w1\n  namespace: default\nspec:\n  size: 3\n"
	src := h.pushBundle("widgets", map[string]string{"manifests/crd.yaml": crd, "manifests/widget.yaml": cr})
	if err := h.c.Create(ctx, newBD("widgets", src)); err != nil {
		t.Fatal(err)
	}
	// No conditions yet: kstatus counts a resource without them as current.
	h.waitBDExact("widgets", rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "All installed objects are healthy")

	setReady := func(status, reason, msg string) {
		t.Helper()
		w := &unstructured.Unstructured{}
		w.SetAPIVersion("widgets.example.com/v1")
		w.SetKind("Widget")
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "w1"}, w); err != nil {
			t.Fatal(err)
		}
		// The widget's operator reports on the generation it saw.
		if err := unstructured.SetNestedField(w.Object, map[string]any{
			"observedGeneration": w.GetGeneration(),
			"conditions": []any{map[string]any{
				"type": "Ready", "status": status, "reason": reason, "message": msg,
				"lastTransitionTime": "2026-01-01T00:00:00Z",
			}},
		}, "status"); err != nil {
			t.Fatal(err)
		}
		if err := h.c.Status().Update(ctx, w); err != nil {
			t.Fatal(err)
		}
	}

	setReady("False", "DatabaseDown", "cannot reach the database")
	h.waitBDExact("widgets", rukpakv1alpha1.TypeHealthy, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnhealthy,
		"Unhealthy objects: Widget default/w1: DatabaseDown: cannot reach the database")

	setReady("True", "Connected", "")
	h.waitBDExact("widgets", rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "All installed objects are healthy")
}
