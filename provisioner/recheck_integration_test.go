package provisioner_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner"
)

// TestIntegrationUnhealthyRechecksBackOff counts the reconciles of a
// BundleDeployment whose Deployment stays unready (no controller rolls it
// out in envtest): its rechecks back off from the first one (1 s here) up
// to the install backoff's max (4 s here), so over a 20 s window it is
// reconciled a handful of times, not once a second. Rolled out, it is
// healthy again.
func TestIntegrationUnhealthyRechecksBackOff(t *testing.T) {
	t.Parallel()
	const base, limit, window = time.Second, 4 * time.Second, 20 * time.Second
	h := newHarnessWith(t, func(o *provisioner.Options) { o.UnhealthyRecheck, o.RetryMax = base, limit })
	ctx := context.Background()
	src := h.pushBundle("recheck", map[string]string{"manifests/dep.yaml": restartDeployment("recheck-web")})
	if err := h.c.Create(ctx, newBD("recheck", src)); err != nil {
		t.Fatal(err)
	}
	h.waitBD("recheck", rukpakv1alpha1.TypeHealthy, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnhealthy, "Deployment default/recheck-web")

	controller := "bundledeployment-" + rukpakv1alpha1.ProvisionerClassPlain
	before := h.successful(controller)
	time.Sleep(window)
	got := h.successful(controller) - before
	t.Logf("%d reconciles of an unhealthy BundleDeployment in %s (rechecks from %s up to %s)", got, window, base, limit)
	// Without the backoff: one a second (19 measured). With it: at most one at
	// each of 1, 3, 7, 11, 15, 19 s after the first (and one more if the
	// window began just before one).
	if max := 8; got > max {
		t.Errorf("%d reconciles in %s, want at most %d: the rechecks do not back off", got, window, max)
	}
	rollOutDeployment(t, h, "recheck-web")
	h.waitBD("recheck", rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "")
}
