package provisioner_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/provisioner"
)

// maxWritesPerInstall bounds the API writes that installing one plain
// bundle of 10 ConfigMaps costs (issue 15 item 3), counted by the API
// server itself (apiserver_request_total): the BundleDeployment's finalizer
// with the creation intent in the same patch (1), the Bundle (1), the
// Bundle's status (1), the 10 applies, the release record (1) and the
// BundleDeployment's status once installed and healthy (1); a first
// install emits no event (its Installed condition says it). It was 24,
// then 17.
const maxWritesPerInstall = 15

// TestIntegrationWritesPerInstall counts every write the provisioner sends
// to install a 10-object bundle, and that a restarted provisioner, finding
// it installed, writes nothing. Counted, not timed.
func TestIntegrationWritesPerInstall(t *testing.T) {
	t.Parallel()
	// A fetch that outlasts the grace shows its Bundle Unpacking first
	// (one more status write for the Bundle and one for its
	// BundleDeployment, by design): on a loaded machine this local one
	// did (17 writes in CI). The count is of an install whose fetch is
	// quick, so the grace is one no fetch here reaches.
	h := newHarnessWith(t, func(o *provisioner.Options) { o.UnpackingGrace = 5 * time.Minute })
	ctx := context.Background()
	files := map[string]string{}
	for i := range 10 {
		files[fmt.Sprintf("manifests/cm-%02d.yaml", i)] = configMap(fmt.Sprintf("writes-%02d", i), "v")
	}
	src := h.pushBundle("writes-v1", files)

	before := quietWrites(t, h)
	if err := h.c.Create(ctx, newBD("writes", src)); err != nil {
		t.Fatal(err)
	}
	h.waitBD("writes", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	h.waitBD("writes", rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "")
	got := quietWrites(t, h).Sub(before)
	// The test's own create.
	if got[testenv.RequestKey{Verb: "POST", Resource: "bundledeployments"}]--; got[testenv.RequestKey{Verb: "POST", Resource: "bundledeployments"}] == 0 {
		delete(got, testenv.RequestKey{Verb: "POST", Resource: "bundledeployments"})
	}
	t.Logf("writes of one 10-object install: %.0f [%s]", got.Total(), got)
	if got.Total() > maxWritesPerInstall {
		t.Errorf("installing 10 objects took %.0f API writes, more than %d: %s", got.Total(), maxWritesPerInstall, got)
	}
	if n := got[testenv.RequestKey{Verb: "APPLY", Resource: "configmaps"}]; n != 10 {
		t.Errorf("%.0f applies of ConfigMaps, want one per object (10): %s", n, got)
	}

	// A new process finds everything installed: it looks at every object
	// and writes nothing.
	reconciled := h.successful("bundledeployment-" + rukpakv1alpha1.ProvisionerClassPlain)
	before = quietWrites(t, h)
	h.kill()
	h.start()
	eventually(t, "the restarted provisioner reconciles the bundle deployment", func() error {
		if n := h.successful("bundledeployment-" + rukpakv1alpha1.ProvisionerClassPlain); n <= reconciled {
			return fmt.Errorf("%d reconciles, %d before the restart", n, reconciled)
		}
		return nil
	})
	if got := quietWrites(t, h).Sub(before); len(got) > 0 {
		t.Errorf("the restarted provisioner wrote %.0f times: %s", got.Total(), got)
	}
}

// quietWrites waits until the API server has served no write for three
// seconds in a row and returns its count of writes, without its own lease
// and flow-control bookkeeping.
func quietWrites(t *testing.T, h *harness) testenv.RequestCounts {
	t.Helper()
	read := func() testenv.RequestCounts {
		all, err := testenv.ServerRequests(context.Background(), h.env.Config)
		if err != nil {
			t.Fatal(err)
		}
		w := all.Writes()
		for k := range w {
			switch k.Resource {
			case "leases", "flowschemas/status", "prioritylevelconfigurations/status":
				delete(w, k)
			}
		}
		return w
	}
	last, still := read(), 0
	deadline := time.Now().Add(testenv.WaitTimeout)
	for still < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the API server kept serving writes for %s; last: %s", testenv.WaitTimeout, last)
		}
		time.Sleep(time.Second)
		now := read()
		if len(now.Sub(last)) == 0 {
			still++
		} else {
			still = 0
		}
		last = now
	}
	return last
}
