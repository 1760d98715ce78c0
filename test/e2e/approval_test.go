package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rukpak-dev/rukpak/internal/testregistry"
)

// TestApprovalGate is what an admin does with spec.upgradeApproval: Manual,
// with kubectl only: the first install proceeds, a template change waits
// (PivotPending, the Pending Bundle column, the preview) while the active
// bundle stays installed and corrected, and the approval annotation lets it
// proceed.
func TestApprovalGate(t *testing.T) {
	shared(t)
	f := newFixtures(t)
	cm := func(name, value string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: default\ndata:\n  value: %q\n", name, value)
	}
	push := func(tag, manifests string) string {
		return f.reg.MustPush(t, f.reg.Ref("approval:"+tag), testregistry.Image(t, testregistry.Layer(t, map[string]string{"manifests/objects.yaml": manifests})))
	}
	apply := func(ref string) {
		t.Helper()
		mustKubectl(t, fmt.Sprintf(`apiVersion: core.rukpak.io/v1alpha1
kind: BundleDeployment
metadata:
  name: approval
spec:
  provisionerClassName: core-rukpak-io-plain
  upgradeApproval: Manual
  template:
    spec:
      source:
        %s
      provisionerClassName: core-rukpak-io-plain
`, f.imageSource(ref)), "apply", "-f", "-")
	}
	t.Cleanup(func() { _, _, _ = kubectl(t, "", "delete", "bd", "approval", "--wait=false") })

	apply(push("v1", cm("approval-a", "v1")+"---\n"+cm("approval-b", "v1")))
	waitFor(t, "bd/approval", "condition=Installed", 2*time.Minute)
	active := jsonpath(t, "bd/approval", "{.status.activeBundle}")

	apply(push("v2", cm("approval-a", "v2")))
	waitFor(t, "bd/approval", "condition=PivotPending", 2*time.Minute)
	pending := jsonpath(t, "bd/approval", "{.status.pendingBundle}")
	if pending == "" || pending == active {
		t.Fatalf("pendingBundle %q, activeBundle %q", pending, active)
	}
	want := fmt.Sprintf(`True/AwaitingApproval: Pivot from bundle %q to bundle %q awaits approval: set annotation core.rukpak.io/approved-bundle=%s to proceed. `+
		`Preview (server-side dry run): 0 to create, 1 to change, 1 to delete, 0 unchanged; change ConfigMap default/approval-a (data.value); delete ConfigMap default/approval-b`,
		active, pending, pending)
	if got := condition(t, "approval", "PivotPending"); got != want {
		t.Fatalf("PivotPending:\n got %s\nwant %s", got, want)
	}
	if out := mustKubectl(t, "", "get", "bd", "approval"); !strings.Contains(out, "PENDING BUNDLE") || !strings.Contains(out, pending) {
		t.Fatalf("kubectl get bd approval:\n%s", out)
	}

	// Waiting: the active bundle's objects stay and are corrected.
	mustKubectl(t, "", "delete", "configmap", "approval-b", "-n", "default")
	eventually(t, time.Minute, "approval-b restored", func() error {
		_, _, err := kubectl(t, "", "get", "configmap", "approval-b", "-n", "default")
		return err
	})
	if v := jsonpath(t, "configmap/approval-a -n default", "{.data.value}"); v != "v1" {
		t.Fatalf("approval-a = %q before the approval, want v1", v)
	}

	mustKubectl(t, "", "annotate", "bd", "approval", "core.rukpak.io/approved-bundle="+pending)
	waitFor(t, "bd/approval", "jsonpath={.status.activeBundle}="+pending, 2*time.Minute)
	waitFor(t, "configmap/approval-a", "jsonpath={.data.value}=v2", time.Minute, "-n", "default")
	waitFor(t, "configmap/approval-b", "delete", time.Minute, "-n", "default")
	if got := condition(t, "approval", "PivotPending"); got != "/: " {
		t.Fatalf("PivotPending after the approval: %q, want none", got)
	}
	if p := jsonpath(t, "bd/approval", "{.status.pendingBundle}"); p != "" {
		t.Fatalf("pendingBundle after the approval: %q", p)
	}
}
