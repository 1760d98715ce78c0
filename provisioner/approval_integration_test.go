package provisioner_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
)

// The approval gate (spec.upgradeApproval: Manual): the first install
// proceeds; a pivot waits with a preview of what it changes while the
// active Bundle stays installed and drift-corrected; an approval naming
// another Bundle does nothing; the approval naming the pending Bundle lets
// the pivot proceed.
func TestIntegrationApprovalGate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()

	v1 := h.pushBundle("gate-v1", map[string]string{"manifests/cm.yaml": configMap("gate-a", "v1") + "---\n" + configMap("gate-b", "v1")})
	bd := newBD("gate", v1)
	bd.Spec.UpgradeApproval = rukpakv1alpha1.UpgradeApprovalManual
	if err := h.c.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}
	bd = h.waitBD("gate", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	active := bd.Status.ActiveBundle
	if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypePivotPending); c != nil || bd.Status.PendingBundle != "" {
		t.Fatalf("first install: PivotPending %+v, pendingBundle %q; want neither", c, bd.Status.PendingBundle)
	}

	// v2 changes gate-a, drops gate-b and adds gate-c.
	v2 := h.pushBundle("gate-v2", map[string]string{"manifests/cm.yaml": configMap("gate-a", "v2") + "---\n" + configMap("gate-c", "v1")})
	h.updateBD("gate", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = v2 })
	bd = h.waitBD("gate", rukpakv1alpha1.TypePivotPending, metav1.ConditionTrue, rukpakv1alpha1.ReasonAwaitingApproval, "")
	pending := bd.Status.PendingBundle
	if pending == "" || pending == active {
		t.Fatalf("pendingBundle %q (active %q)", pending, active)
	}
	wantMsg := fmt.Sprintf("Pivot from bundle %q to bundle %q awaits approval: set annotation core.rukpak.io/approved-bundle=%s to proceed. "+
		"Preview (server-side dry run): 1 to create, 1 to change, 1 to delete, 0 unchanged; create ConfigMap default/gate-c; change ConfigMap default/gate-a (data.value); delete ConfigMap default/gate-b",
		active, pending, pending)
	if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypePivotPending); c.Message != wantMsg {
		t.Fatalf("PivotPending message:\n got %s\nwant %s", c.Message, wantMsg)
	}
	if bd.Status.ActiveBundle != active {
		t.Fatalf("activeBundle %q while the pivot waits, want %q", bd.Status.ActiveBundle, active)
	}
	if got := eventNotes(t, h, "gate", rukpakv1alpha1.ReasonAwaitingApproval); len(got) != 1 || got[0] != wantMsg {
		t.Fatalf("AwaitingApproval events: %q", got)
	}
	for _, name := range []string{active, pending} {
		if b := h.bundle(name); b == nil {
			t.Fatalf("bundle %s is gone", name)
		}
	}

	t.Run("printer column", func(t *testing.T) {
		out := kubectl(t, h, "get", "bundledeployment", "gate")
		if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.Contains(lines[0], "PENDING BUNDLE") || !strings.Contains(lines[1], pending) {
			t.Fatalf("kubectl get:\n%s", out)
		}
	})

	// request asks for a reconcile and waits until it was handled.
	request := func(v string) *rukpakv1alpha1.BundleDeployment {
		t.Helper()
		h.updateBD("gate", func(bd *rukpakv1alpha1.BundleDeployment) {
			bd.Annotations = map[string]string{rukpakv1alpha1.AnnotationReconcileRequestedAt: v, rukpakv1alpha1.AnnotationApprovedBundle: bd.Annotations[rukpakv1alpha1.AnnotationApprovedBundle]}
		})
		var bd *rukpakv1alpha1.BundleDeployment
		eventually(t, "reconcile request "+v+" handled", func() error {
			if bd = h.bd("gate"); bd.Status.LastHandledReconcileAt != v {
				return fmt.Errorf("lastHandledReconcileAt %q", bd.Status.LastHandledReconcileAt)
			}
			return nil
		})
		return bd
	}

	t.Run("the active bundle stays installed and drift-corrected", func(t *testing.T) {
		cm, err := h.getCM("gate-b")
		if err != nil {
			t.Fatal(err)
		}
		if err := h.c.Delete(ctx, cm); err != nil {
			t.Fatal(err)
		}
		eventually(t, "gate-b restored", func() error {
			_, err := h.getCM("gate-b")
			return err
		})
		cm, err = h.getCM("gate-a")
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["value"] = "edited"
		if err := h.c.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		eventually(t, "gate-a restored to v1", func() error {
			cm, err := h.getCM("gate-a")
			if err != nil {
				return err
			}
			if cm.Data["value"] != "v1" {
				return fmt.Errorf("gate-a %v", cm.Data)
			}
			return nil
		})
		if _, err := h.getCM("gate-c"); !apierrors.IsNotFound(err) {
			t.Fatalf("gate-c before approval: %v, want not found", err)
		}
		bd := request("drift-checked")
		if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled); c == nil || c.Status != metav1.ConditionTrue || c.Message != fmt.Sprintf("Instantiated bundle %q successfully", active) {
			t.Fatalf("Installed while waiting: %+v", c)
		}
	})

	t.Run("an approval of another bundle does nothing", func(t *testing.T) {
		h.updateBD("gate", func(bd *rukpakv1alpha1.BundleDeployment) {
			bd.Annotations[rukpakv1alpha1.AnnotationApprovedBundle] = active
		})
		bd := request("other-approval")
		if bd.Status.ActiveBundle != active || bd.Status.PendingBundle != pending {
			t.Fatalf("active %q, pending %q; want %q, %q", bd.Status.ActiveBundle, bd.Status.PendingBundle, active, pending)
		}
		// The reconcile request refreshed the preview: the same.
		if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypePivotPending); c == nil || c.Message != wantMsg {
			t.Fatalf("PivotPending: %+v", c)
		}
		if _, err := h.getCM("gate-c"); !apierrors.IsNotFound(err) {
			t.Fatalf("gate-c: %v, want not found", err)
		}
	})

	t.Run("the approval lets the pivot proceed", func(t *testing.T) {
		h.updateBD("gate", func(bd *rukpakv1alpha1.BundleDeployment) {
			bd.Annotations[rukpakv1alpha1.AnnotationApprovedBundle] = pending
		})
		bd := h.waitBDExact("gate", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded,
			fmt.Sprintf("Instantiated bundle %q successfully", pending))
		if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypePivotPending); c != nil || bd.Status.PendingBundle != "" || bd.Status.ActiveBundle != pending {
			t.Fatalf("after approval: PivotPending %+v, pendingBundle %q, activeBundle %q", c, bd.Status.PendingBundle, bd.Status.ActiveBundle)
		}
		if cm, err := h.getCM("gate-a"); err != nil || cm.Data["value"] != "v2" {
			t.Fatalf("gate-a after approval: %v, %v", cm.Data, err)
		}
		if _, err := h.getCM("gate-c"); err != nil {
			t.Fatalf("gate-c after approval: %v", err)
		}
		eventually(t, "gate-b and the old bundle deleted", func() error {
			if _, err := h.getCM("gate-b"); !apierrors.IsNotFound(err) {
				return fmt.Errorf("gate-b: %w", err)
			}
			_, err := h.getBundle(active)
			return err
		})
		want := fmt.Sprintf("Pivot from bundle %q to bundle %q approved by annotation core.rukpak.io/approved-bundle", active, pending)
		if got := eventNotes(t, h, "gate", "PivotApproved"); len(got) != 1 || got[0] != want {
			t.Fatalf("PivotApproved events: %q, want [%q]", got, want)
		}
	})

	t.Run("back to Automatic: a pivot proceeds on its own", func(t *testing.T) {
		v3 := h.pushBundle("gate-v3", map[string]string{"manifests/cm.yaml": configMap("gate-a", "v3")})
		h.updateBD("gate", func(bd *rukpakv1alpha1.BundleDeployment) {
			bd.Spec.Template.Spec.Source = v3
			bd.Spec.UpgradeApproval = rukpakv1alpha1.UpgradeApprovalAutomatic
		})
		eventually(t, "pivot to v3", func() error {
			cm, err := h.getCM("gate-a")
			if err != nil {
				return err
			}
			if cm.Data["value"] != "v3" {
				return fmt.Errorf("gate-a %v", cm.Data)
			}
			return nil
		})
		if bd := h.bd("gate"); conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypePivotPending) != nil || bd.Status.PendingBundle != "" {
			t.Fatalf("Automatic: %+v, pendingBundle %q", bd.Status.Conditions, bd.Status.PendingBundle)
		}
	})
}

// eventNotes lists the notes of the events of reason on BundleDeployment
// name.
func eventNotes(t *testing.T, h *harness, name, reason string) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := h.c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "BundleDeployment" && e.Regarding.Name == name && e.Reason == reason {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// kubectl runs the control plane's kubectl against h's API server.
func kubectl(t *testing.T, h *harness, args ...string) string {
	t.Helper()
	user, err := h.env.Env.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(testenv.Kubectl(t), append([]string{"--kubeconfig", path}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// A pivot of a registry+v1 bundle with webhooks (marin3r 0.13.1) to a
// Bundle with the same content: the preview fills in the serving
// certificate and CA bundles as the install does, so nothing shows as a
// change.
func TestIntegrationApprovalPreviewWebhookBundle(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	dir := "../../shared/testdata/registry-v1/marin3r-0.13.1"
	ref := h.reg.Ref("approval:marin3r")
	h.reg.MustPush(t, ref, testregistry.Image(t, testregistry.LayerFromDir(t, dir, "")))
	bd := newBD("marin3r", rukpakv1alpha1.BundleSource{
		Type:  rukpakv1alpha1.SourceTypeImage,
		Image: &rukpakv1alpha1.ImageSource{Ref: ref, CertificateData: string(h.reg.CAPEM)},
	})
	bd.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	bd.Spec.Template.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	bd.Spec.UpgradeApproval = rukpakv1alpha1.UpgradeApprovalManual
	if err := h.c.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}
	bd = h.waitBD("marin3r", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	active := bd.Status.ActiveBundle

	// A template label is a new Bundle of the same content.
	h.updateBD("marin3r", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Metadata.Labels["release"] = "same" })
	bd = h.waitBD("marin3r", rukpakv1alpha1.TypePivotPending, metav1.ConditionTrue, rukpakv1alpha1.ReasonAwaitingApproval, "")
	c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypePivotPending)
	// All 22 objects of the release unchanged, the certificate Secret and
	// the 3 webhook configurations (caBundle, namespaceSelector) included.
	want := fmt.Sprintf("Pivot from bundle %q to bundle %q awaits approval: set annotation core.rukpak.io/approved-bundle=%s to proceed. "+
		"Preview (server-side dry run): 0 to create, 0 to change, 0 to delete, 22 unchanged", active, bd.Status.PendingBundle, bd.Status.PendingBundle)
	if c.Message != want {
		t.Fatalf("PivotPending message:\n got %s\nwant %s", c.Message, want)
	}
	if bd.Status.ActiveBundle != active {
		t.Fatalf("activeBundle %q, want %q", bd.Status.ActiveBundle, active)
	}
}
