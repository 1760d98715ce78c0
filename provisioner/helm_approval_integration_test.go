package provisioner_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
)

// The approval gate holds a helm-class pivot, its preview rendered from
// the new chart with the BundleDeployment's values and compared by
// server-side dry run (the release's objects; hooks listed as would run);
// the approval lets the upgrade through.
func TestIntegrationHelmApprovalPreview(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.createNamespace("hgate")
	h.createHelmBD("hgate", h.pushChartDir("charts/hgate-v1", hooksChart), `{"installNamespace":"hgate"}`)
	h.updateBD("hgate", func(bd *rukpakv1alpha1.BundleDeployment) {
		bd.Spec.UpgradeApproval = rukpakv1alpha1.UpgradeApprovalManual
	})
	active := h.waitBD("hgate", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "").Status.ActiveBundle

	// v2: another default message, and no Gadget.
	v2 := t.TempDir()
	if err := os.CopyFS(v2, os.DirFS(hooksChart)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v2, "values.yaml"), []byte("message: v2\nconfigMapHooks: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	objects := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-config\ndata:\n  message: {{ .Values.message | quote }}\n" +
		"  kubeVersion: {{ .Capabilities.KubeVersion.Version | quote }}\n  servesGadgets: {{ .Capabilities.APIVersions.Has \"hooks.test.rukpak.io/v1/Gadget\" | quote }}\n"
	if err := os.WriteFile(filepath.Join(v2, "templates", "objects.yaml"), []byte(objects), 0o600); err != nil {
		t.Fatal(err)
	}
	src := h.pushChartDir("charts/hgate-v2", v2)
	h.updateBD("hgate", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = src })
	// Once rendered (a render over the fast lane's time shows "pending" first).
	bd := h.waitBD("hgate", rukpakv1alpha1.TypePivotPending, metav1.ConditionTrue, rukpakv1alpha1.ReasonAwaitingApproval, "to create")
	pending := bd.Status.PendingBundle
	want := fmt.Sprintf("Pivot from bundle %q to bundle %q awaits approval: set annotation core.rukpak.io/approved-bundle=%s to proceed. "+
		"Preview (server-side dry run): 0 to create, 1 to change, 1 to delete, 0 unchanged; change ConfigMap hgate/hgate-config (data.message); delete Gadget hgate/hgate-gadget; "+
		"hooks would run: ConfigMap hgate/hgate-hook-first (pre-upgrade), ConfigMap hgate/hgate-hook-second (pre-upgrade)", active, pending, pending)
	if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypePivotPending); c.Message != want {
		t.Errorf("PivotPending message:\n got %s\nwant %s", c.Message, want)
	}
	h.waitHistory("hgate", h.stockHistory, "1:deployed")

	h.updateBD("hgate", func(bd *rukpakv1alpha1.BundleDeployment) {
		metav1.SetMetaDataAnnotation(&bd.ObjectMeta, rukpakv1alpha1.AnnotationApprovedBundle, pending)
	})
	h.waitHistory("hgate", h.stockHistory, "1:superseded", "2:deployed")
	cm := &corev1.ConfigMap{}
	if err := h.get(cm, "hgate", "hgate-config"); err != nil || cm.Data["message"] != "v2" {
		t.Fatalf("message %q (%v) after the approved pivot, want v2", cm.Data["message"], err)
	}
}

// In Manual mode a spec.config change of the active Bundle (new helm
// values) waits for approval like a pivot: the ConfigPending condition and
// status.pendingConfig name it, with a preview, the release stays at
// revision 1 with the old values, and the approval lets the upgrade
// through.
func TestIntegrationHelmApprovalConfigChange(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.createNamespace("hval")
	h.createHelmBD("hval", h.pushChartDir("charts/hval-v1", hooksChart), `{"installNamespace":"hval"}`)
	h.updateBD("hval", func(bd *rukpakv1alpha1.BundleDeployment) {
		bd.Spec.UpgradeApproval = rukpakv1alpha1.UpgradeApprovalManual
	})
	installed := h.waitBD("hval", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	active := installed.Status.ActiveBundle
	if installed.Status.InstalledConfig == "" {
		t.Fatalf("status.installedConfig not recorded")
	}
	h.waitHistory("hval", h.stockHistory, "1:deployed")

	h.setConfig("hval", `{"installNamespace":"hval","values":"message: changed\n"}`)
	// The preview is "pending" while its render runs in the background:
	// waited for until computed.
	bd := h.waitBD("hval", rukpakv1alpha1.TypeConfigPending, metav1.ConditionTrue, rukpakv1alpha1.ReasonAwaitingApproval, "to create")
	pending := bd.Status.PendingConfig
	if !strings.HasPrefix(pending, active+"/config-") {
		t.Fatalf("status.pendingConfig = %q, want %s/config-<fingerprint>", pending, active)
	}
	want := fmt.Sprintf("Change of spec.config of bundle %q awaits approval: set annotation core.rukpak.io/approved-bundle=%s to proceed (until then nothing is installed or corrected). "+
		"Preview (server-side dry run): 0 to create, 1 to change, 0 to delete, 1 unchanged; change ConfigMap hval/hval-config (data.message); "+
		"hooks would run: ConfigMap hval/hval-hook-first (pre-upgrade), ConfigMap hval/hval-hook-second (pre-upgrade)", active, pending)
	if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeConfigPending); c.Message != want {
		t.Errorf("ConfigPending message:\n got %s\nwant %s", c.Message, want)
	}
	// A reconcile request is handled (so it ran past the gate) and the
	// release is still revision 1 with the old values.
	h.updateBD("hval", func(bd *rukpakv1alpha1.BundleDeployment) {
		metav1.SetMetaDataAnnotation(&bd.ObjectMeta, rukpakv1alpha1.AnnotationReconcileRequestedAt, "1")
	})
	eventually(t, "the reconcile request handled", func() error {
		if got := h.bd("hval").Status.LastHandledReconcileAt; got != "1" {
			return fmt.Errorf("lastHandledReconcileAt %q", got)
		}
		return nil
	})
	h.waitHistory("hval", h.stockHistory, "1:deployed")
	cm := &corev1.ConfigMap{}
	if err := h.get(cm, "hval", "hval-config"); err != nil || cm.Data["message"] != "hello" {
		t.Fatalf("message %q (%v) while the change waits, want hello", cm.Data["message"], err)
	}

	h.updateBD("hval", func(bd *rukpakv1alpha1.BundleDeployment) {
		metav1.SetMetaDataAnnotation(&bd.ObjectMeta, rukpakv1alpha1.AnnotationApprovedBundle, pending)
	})
	h.waitHistory("hval", h.stockHistory, "1:superseded", "2:deployed")
	if err := h.get(cm, "hval", "hval-config"); err != nil || cm.Data["message"] != "changed" {
		t.Fatalf("message %q (%v) after the approval, want changed", cm.Data["message"], err)
	}
	eventually(t, "ConfigPending cleared", func() error {
		bd := h.bd("hval")
		if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeConfigPending); c != nil || bd.Status.PendingConfig != "" {
			return fmt.Errorf("condition %+v, pendingConfig %q", c, bd.Status.PendingConfig)
		}
		return nil
	})
}
