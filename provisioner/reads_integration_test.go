package provisioner_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// TestIntegrationReadsPerInstall counts the reads an install of objects
// without a status sends (issue 15 item 1): none of the objects is read
// back for its health (the apply's answer says it exists at the version
// it was applied at, which is all a ConfigMap's or a ServiceAccount's
// health is), and the release history is read by name, never by a LIST
// of the records' namespace (whose cost on the API server grows with every
// installed BundleDeployment). Drift is still corrected afterwards: an
// edited and a deleted ConfigMap come back. Counted, not timed.
func TestIntegrationReadsPerInstall(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	files := map[string]string{
		"manifests/sa.yaml": "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: reads-sa\n  namespace: default\n",
	}
	for i := range 9 {
		files[fmt.Sprintf("manifests/cm-%02d.yaml", i)] = configMap(fmt.Sprintf("reads-%02d", i), "v")
	}
	src := h.pushBundle("reads-v1", files)

	quietWrites(t, h) // the provisioner's start-up (its caches' LISTs) is over
	before, err := testenv.ServerRequests(ctx, h.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.c.Create(ctx, newBD("reads", src)); err != nil {
		t.Fatal(err)
	}
	h.waitBD("reads", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	h.waitBD("reads", rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "")
	quietWrites(t, h)
	after, err := testenv.ServerRequests(ctx, h.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	got := after.Sub(before)
	t.Logf("requests of one 10-object install: %s", got)
	// The ownership check before the apply: one LIST for the nine
	// ConfigMaps, one GET for the lone ServiceAccount; nothing after.
	for k, want := range map[testenv.RequestKey]float64{
		{Verb: "GET", Resource: "configmaps"}: 0, {Verb: "GET", Resource: "serviceaccounts"}: 1, {Verb: "LIST", Resource: "secrets"}: 0,
	} {
		if n := got[k]; n != want {
			t.Errorf("%.0f %s %s while installing 10 objects without a status, want %.0f: %s", n, k.Verb, k.Resource, want, got)
		}
	}

	// Drift: an edit and a delete are undone.
	cm, err := h.getCM("reads-03")
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["value"] = "edited"
	if err := h.c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "reads-05"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the edited and the deleted ConfigMap restored", func() error {
		for _, name := range []string{"reads-03", "reads-05"} {
			cm, err := h.getCM(name)
			if err != nil {
				return err
			}
			if cm.Data["value"] != "v" {
				return fmt.Errorf("%s holds %q", name, cm.Data["value"])
			}
		}
		return nil
	})
	sa := &corev1.ServiceAccount{}
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "reads-sa"}, sa); err != nil {
		t.Fatal(err)
	}
	h.waitBD("reads", rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "")
}

// TestIntegrationReadsPerCRDInstall counts the reads of CRDs an install of
// two sends after applying them: each is polled until Established, and
// that read is also its health and the next preflight's comparison (it is
// exactly as applied then), so neither the health check nor the preflight
// of the reconciles that follow reads it again (the watch on the kind's
// metadata starts with a streamed WATCH, not a LIST). The install namespace given
// to every object of the bundle does not hide that its CRDs are the
// applied ones. Counted, not timed.
func TestIntegrationReadsPerCRDInstall(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	src := h.pushBundle("reads-crds-v1", map[string]string{
		"manifests/a.yaml":  restartCRD("reads.example.com", 1),
		"manifests/b.yaml":  restartCRD("reads.example.com", 2),
		"manifests/cm.yaml": configMap("reads-crds", "v"),
	})
	quietWrites(t, h)
	before, err := testenv.ServerRequests(ctx, h.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	bd := newBD("reads-crds", src)
	// Given to every object without one, CRDs included, which the
	// release drops as it applies them.
	bd.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(`{"installNamespace":"default"}`)}
	if err := h.c.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}
	h.waitBD("reads-crds", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	h.waitBD("reads-crds", rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "")
	// One more reconcile: the ConfigMap deleted and restored.
	if err := h.c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "reads-crds"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted ConfigMap restored", func() error {
		_, err := h.getCM("reads-crds")
		return err
	})
	quietWrites(t, h)
	after, err := testenv.ServerRequests(ctx, h.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	got := after.Sub(before)
	t.Logf("requests of an install of two CRDs: %s", got)
	if n := got[testenv.RequestKey{Verb: "LIST", Resource: "customresourcedefinitions"}]; n != 0 {
		t.Errorf("%.0f LISTs of CRDs, want none: %s", n, got)
	}
}
