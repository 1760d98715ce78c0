package provisioner_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// TestIntegrationRestartReads counts the reads a provisioner restart
// sends to re-verify installed BundleDeployments: objects of kinds without
// a status that nobody wrote since their release's records were are
// judged from the metadata cache (no GET each), and each release's history
// is read once, not once more per watched kind. What changed while it was
// down is still found and restored: an edited and a deleted ConfigMap.
// Counted with the API server's own request counts, not timed.
func TestIntegrationRestartReads(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	const bds, cms = 4, 10
	for b := range bds {
		files := map[string]string{}
		for i := range cms {
			files[fmt.Sprintf("manifests/cm-%02d.yaml", i)] = configMap(fmt.Sprintf("rr%d-%02d", b, i), "v")
		}
		name := fmt.Sprintf("rr%d", b)
		if err := h.c.Create(ctx, newBD(name, h.pushBundle(name, files))); err != nil {
			t.Fatal(err)
		}
	}
	for b := range bds {
		h.waitBD(fmt.Sprintf("rr%d", b), rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "")
	}
	quietWrites(t, h)
	h.kill()

	// While it is down: one ConfigMap edited, one deleted.
	cm, err := h.getCM("rr1-03")
	testenv.MustNotError(t, err, "reading rr1-03")
	cm.Data["value"] = "edited"
	testenv.MustNotError(t, h.c.Update(ctx, cm), "editing rr1-03")
	testenv.MustNotError(t, h.c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "rr2-05"}}), "deleting rr2-05")

	before, err := testenv.ServerRequests(ctx, h.env.Config)
	testenv.MustNotError(t, err, "reading request counts")
	h.start()
	// Waited for by LISTs: the counts below are the provisioner's GETs.
	eventually(t, "the edited and the deleted ConfigMap restored", func() error {
		list := &corev1.ConfigMapList{}
		if err := h.c.List(ctx, list, client.InNamespace("default")); err != nil {
			return err
		}
		restored := 0
		for _, cm := range list.Items {
			if (cm.Name == "rr1-03" || cm.Name == "rr2-05") && cm.Data["value"] == "v" && cm.DeletionTimestamp.IsZero() {
				restored++
			}
		}
		if restored != 2 {
			return fmt.Errorf("%d of 2 restored", restored)
		}
		return nil
	})
	quietWrites(t, h)
	after, err := testenv.ServerRequests(ctx, h.env.Config)
	testenv.MustNotError(t, err, "reading request counts")
	got := after.Sub(before)
	t.Logf("requests of a restart with %d BundleDeployments of %d ConfigMaps: %s", bds, cms, got)
	cmGets, recordGets := got[testenv.RequestKey{Verb: "GET", Resource: "configmaps"}], got[testenv.RequestKey{Verb: "GET", Resource: "secrets"}]
	// The two changed ConfigMaps: read (or looked for) once to be
	// restored, once after.
	if cmGets > 4 {
		t.Errorf("%.0f ConfigMap GETs at restart, want at most 4 (the two changed ones; %d unchanged need none)", cmGets, bds*cms-2)
	}
	// One release record each, and again for the two whose restore
	// brought them back (unless the restore's own answer already said
	// where the object is, as it mostly does).
	if recordGets > bds+2 {
		t.Errorf("%.0f release record GETs at restart, want at most %d (one history read per BundleDeployment, and one more for each of the two restored)", recordGets, bds+2)
	}
	if per := (cmGets + recordGets) / bds; per > 2 {
		t.Errorf("%.1f GETs per BundleDeployment at restart, want at most 2", per)
	}
	for b := range bds {
		h.waitBD(fmt.Sprintf("rr%d", b), rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "")
	}
}
