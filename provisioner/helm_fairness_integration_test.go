package provisioner_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/helm"
)

// harmlessChart installs one ConfigMap, no hooks.
var harmlessChart = map[string]string{
	"Chart.yaml":        "apiVersion: v2\nname: harmless\nversion: 1.0.0\n",
	"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  x: \"ok\"\n",
}

// installTime creates a helm-class BundleDeployment of src named name and
// returns how long it took to become Installed.
func (h *harness) installTime(name string, src rukpakv1alpha1.BundleSource, config string) time.Duration {
	h.t.Helper()
	start := time.Now()
	h.createHelmBD(name, src, config)
	h.waitBD(name, rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "Instantiated bundle")
	return time.Since(start)
}

// failedBD returns the first of names whose Installed condition says its
// install failed.
func (h *harness) failedBD(names []string) string {
	for _, n := range names {
		if c := conditions.Get(h.bd(n).Status.Conditions, rukpakv1alpha1.TypeInstalled); c != nil && c.Status == metav1.ConditionFalse &&
			(c.Reason == rukpakv1alpha1.ReasonInstallFailed || c.Reason == rukpakv1alpha1.ReasonUpgradeFailed) {
			return n + ": " + c.Message
		}
	}
	return ""
}

// TestIntegrationHelmFairRenders: four charts whose templates loop until
// the render's time limit (30 s) do not delay a harmless chart's install
// beyond the fast lane's attempt of each (helm's render lanes): it is
// Installed while all four still render (in the slow lane, one at a time,
// so the first of them cannot fail before 30 s have passed), and the
// provisioner's live heap grows by at most 64 MiB meanwhile. Before, the
// four took both render slots and all four workers of the class for 30 s
// each: the harmless chart waited until two of them failed. Not parallel:
// the heap is this test's alone.
func TestIntegrationHelmFairRenders(t *testing.T) {
	// Not parallel: it measures the process's live heap and sets the
	// process-wide render lanes.
	// A fast lane long enough for the harmless chart on a loaded machine;
	// the hostile charts loop far longer.
	prev := helm.SetRenderLanes(helm.RenderLanes{Fast: 4, FastTimeout: 5 * time.Second, FastMemory: 128 << 20, Slow: 1})
	t.Cleanup(func() { helm.SetRenderLanes(prev) })
	h := newHarness(t)
	h.createNamespace("fair-renders")
	harmless := h.pushBundle("fair-harmless", harmlessChart)
	alone := h.installTime("fair-alone", harmless, `{"installNamespace":"fair-renders"}`)

	looping := h.pushBundle("fair-looping", map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: looping\nversion: 1.0.0\n",
		// 10^10 iterations, allocating little: only the time limit stops it.
		"templates/cm.yaml": "{{ range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: never\n",
	})
	heap0 := liveHeap()
	var hostile []string
	start := time.Now()
	for i := range 4 {
		name := fmt.Sprintf("fair-looping-%d", i)
		hostile = append(hostile, name)
		h.createHelmBD(name, looping, `{"installNamespace":"fair-renders"}`)
	}
	// Their renders have started: their Bundles unpacked.
	for _, n := range hostile {
		h.waitBD(n, rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionTrue, rukpakv1alpha1.ReasonUnpackSuccessful, "")
	}
	beside := h.installTime("fair-beside", harmless, `{"installNamespace":"fair-renders"}`)
	if f := h.failedBD(hostile); f != "" {
		t.Fatalf("the harmless chart was installed only once a looping one failed (%s, %s after the first was created)", f, time.Since(start))
	}
	grown := int64(liveHeap()) - int64(heap0)
	t.Logf("harmless install: %s alone, %s beside 4 looping charts; live heap grew by %d KiB", alone, beside, grown>>10)
	if grown > 64<<20 {
		t.Errorf("live heap grew by %d MiB, more than 64", grown>>20)
	}
	// The looping ones wait in the slow lane, and say so.
	for _, n := range hostile {
		h.waitBD(n, rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInstallPending, `rendering chart "looping" in the slow lane`)
	}
	// Deleting them cancels their renders.
	for _, n := range hostile {
		if err := h.c.Delete(context.Background(), h.bd(n)); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range hostile {
		h.waitBDGone(n)
	}
}

// TestIntegrationHelmHooksAwaitedInBackground: four releases whose
// pre-install hook Job never finishes (timeout 30m; envtest runs no Job
// controller) hold none of the class's workers: a harmless chart is
// Installed while they wait, each saying which hook it waits for; deleting
// them stops the waits (each records its revision failed) and uninstalls
// them. Before, the four hooks held all four workers for 30 minutes.
func TestIntegrationHelmHooksAwaitedInBackground(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.createNamespace("fair-hooks")
	harmless := h.pushBundle("hooks-harmless", harmlessChart)
	alone := h.installTime("hooks-alone", harmless, `{"installNamespace":"fair-hooks"}`)

	hooked := h.pushBundle("hooks-never", map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: never\nversion: 1.0.0\n",
		"templates/hook.yaml": `apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-wait
  annotations:
    helm.sh/hook: pre-install
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: wait
        image: busybox
        command: ["sleep", "infinity"]
`,
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n",
	})
	heap0 := liveHeap()
	var hostile []string
	for i := range 4 {
		name := fmt.Sprintf("hooks-never-%d", i)
		hostile = append(hostile, name)
		h.createHelmBD(name, hooked, `{"installNamespace":"fair-hooks","timeout":"30m"}`)
	}
	// Their hooks run.
	for _, n := range hostile {
		eventually(t, "hook Job of "+n, func() error { return h.get(&batchv1.Job{}, "fair-hooks", n+"-wait") })
	}
	beside := h.installTime("hooks-beside", harmless, `{"installNamespace":"fair-hooks"}`)
	if f := h.failedBD(hostile); f != "" {
		t.Fatalf("a never-ending hook failed before its 30m: %s", f)
	}
	// Each says which hook it waits for.
	for _, n := range hostile {
		h.waitBD(n, rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInstallPending,
			fmt.Sprintf("installing release %s: waiting for hook Job fair-hooks/%s-wait (up to 30m0s)", n, n))
	}
	grown := int64(liveHeap()) - int64(heap0)
	t.Logf("harmless install: %s alone, %s beside 4 never-ending hooks; live heap grew by %d KiB (parallel tests included)", alone, beside, grown>>10)

	for _, n := range hostile {
		if err := h.c.Delete(context.Background(), h.bd(n)); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range hostile {
		h.waitBDGone(n)
	}
}

// waitBDGone waits until BundleDeployment name is deleted (finalized).
func (h *harness) waitBDGone(name string) {
	h.t.Helper()
	eventually(h.t, "bundle deployment "+name+" deleted", func() error {
		bd := &rukpakv1alpha1.BundleDeployment{}
		err := h.c.Get(context.Background(), client.ObjectKey{Name: name}, bd)
		switch {
		case err == nil:
			c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled)
			return fmt.Errorf("still there, Installed %+v", c)
		case strings.Contains(err.Error(), "not found"):
			return nil
		}
		return err
	})
}
