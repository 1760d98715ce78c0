package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
)

// applyHelmBD creates or updates a helm-class BundleDeployment of an image
// holding a chart directory, with the given values.
func applyHelmBD(t *testing.T, f *fixtures, name, ref, ns, values string) {
	t.Helper()
	mustKubectl(t, helmBD(name, ns, "", values, f.imageSource(ref)), "apply", "-f", "-")
}

// TestRealPodsHelmHooks runs the hooks test chart's hook Jobs as real pods
// (rukpak.test/pause:v1 -v exits 0, rukpak.test/crashloop:v1 exits 3): in
// weight order, kept or deleted per hook-delete-policy, and a failing
// pre-upgrade Job fails the upgrade, keeps revision 1 and is named in the
// Installed condition.
func TestRealPodsHelmHooks(t *testing.T) {
	if !suite.realPods {
		t.Skip("hook Jobs need pods that run (kwok never completes them): make test-e2e-node, or E2E_REAL_PODS=1 with the test images loaded")
	}
	shared(t)
	f := newFixtures(t)
	chart := filepath.Join(testenv.RepoRoot(), "test", "testdata", "charts", "hooks")
	ref := f.reg.MustPush(t, f.reg.Ref("charts/hooks:v1"), testregistry.Image(t, testregistry.LayerFromDir(t, chart, "")))
	mustKubectl(t, "", "create", "namespace", "hookjobs")
	defer mustKubectl(t, "", "delete", "namespace", "hookjobs", "--wait=false")
	defer mustKubectl(t, "", "delete", "crd", "gadgets.hooks.test.rukpak.io", "--ignore-not-found")

	applyHelmBD(t, f, "hookjobs", ref, "hookjobs", "jobs: true\nconfigMapHooks: false\n")
	waitFor(t, "bd/hookjobs", "condition=Installed", 3*time.Minute)
	// job-a (weight -5) and job-b (weight 5) stay (before-hook-creation),
	// job-c (weight 10, hook-succeeded) is deleted once it succeeded.
	times := jsonpath(t, "jobs -n hookjobs", `{range .items[*]}{.metadata.name}={.status.startTime}/{.status.completionTime}{"\n"}{end}`)
	jobs := map[string][2]time.Time{}
	for _, line := range strings.Fields(times) {
		name, span, _ := strings.Cut(line, "=")
		start, end, _ := strings.Cut(span, "/")
		s, err1 := time.Parse(time.RFC3339, start)
		e, err2 := time.Parse(time.RFC3339, end)
		if err1 != nil || err2 != nil {
			t.Fatalf("job %s not completed: %q", name, span)
		}
		jobs[name] = [2]time.Time{s, e}
	}
	a, okA := jobs["hookjobs-job-a"]
	b, okB := jobs["hookjobs-job-b"]
	if _, okC := jobs["hookjobs-job-c"]; !okA || !okB || okC || len(jobs) != 2 {
		t.Fatalf("hook Jobs after install: %q, want job-a and job-b kept, job-c deleted", times)
	}
	if b[0].Before(a[1]) {
		t.Fatalf("job-b (weight 5) started %s, before job-a (weight -5) completed %s", b[0], a[1])
	}
	t.Logf("hook Jobs: %q", times)

	// A pre-upgrade Job that exits 3 fails the upgrade; revision 1 stays.
	applyHelmBD(t, f, "hookjobs", ref, "hookjobs", "jobs: true\nconfigMapHooks: false\nfailJob: true\nmessage: v2\n")
	// While the hooks run, Installed is False with reason InstallPending
	// (the upgrade goes on in the background): wait for its outcome.
	waitFor(t, "bd/hookjobs", `jsonpath={.status.conditions[?(@.type=="Installed")].reason}=UpgradeFailed`, 3*time.Minute)
	got := condition(t, "hookjobs", "Installed")
	for _, want := range []string{`False/UpgradeFailed: upgrading release "hookjobs": pre-upgrade hook Job hookjobs-job-fail (hooks/templates/jobs.yaml) failed: `, "BackoffLimitExceeded", "(revision 2 failed;"} {
		if !strings.Contains(got, want) {
			t.Fatalf("Installed = %q lacks %q", got, want)
		}
	}
	t.Logf("Installed = %s", got)
	if msg := jsonpath(t, "configmap/hookjobs-config -n hookjobs", "{.data.message}"); msg != "hello" {
		t.Fatalf("message %q after the failed upgrade, want revision 1's hello", msg)
	}
	if st := jsonpath(t, "secret/sh.helm.release.v1.hookjobs.v1 -n rukpak-system", "{.metadata.labels.status}"); st != "deployed" {
		t.Fatalf("revision 1 status %q, want deployed", st)
	}

	// A change upgrades again.
	applyHelmBD(t, f, "hookjobs", ref, "hookjobs", "jobs: true\nconfigMapHooks: false\nmessage: v3\n")
	eventually(t, 3*time.Minute, "revision 3 deployed", func() error {
		if msg := jsonpath(t, "configmap/hookjobs-config -n hookjobs", "{.data.message}"); msg != "v3" {
			return fmt.Errorf("message %q", msg)
		}
		return nil
	})
	waitFor(t, "bd/hookjobs", "condition=Installed", time.Minute)
	mustKubectl(t, "", "delete", "bd", "hookjobs", "--timeout=2m")
	if _, _, err := kubectl(t, "", "get", "configmap", "hookjobs-config", "-n", "hookjobs"); err == nil {
		t.Fatal("the release's ConfigMap is left after uninstall")
	}
	mustKubectl(t, "", "get", "crd", "gadgets.hooks.test.rukpak.io")
}
