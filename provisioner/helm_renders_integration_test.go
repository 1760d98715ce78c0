package provisioner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testmetrics"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/metrics"
)

// revisionsChart's templates branch on .Release.IsUpgrade and
// .Release.Revision, and look a ConfigMap up when asked to.
var revisionsChart = filepath.Join(testenv.RepoRoot(), "test", "testdata", "charts", "revisions")

// helmController is the helm class's BundleDeployment controller.
const helmController = "bundledeployment-" + rukpakv1alpha1.ProvisionerClassHelm

// renders are the rukpak_helm_renders_total series of BundleDeployment
// name, as "result count".
func renders(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	for _, s := range testmetrics.Series(t, metrics.NameHelmRenders, map[string]string{"name": name}) {
		labels, count, _ := strings.Cut(s, "} ")
		_, result, _ := strings.Cut(labels, ",result=")
		out = append(out, result+" "+count)
	}
	return out
}

func waitRenders(t *testing.T, name string, want ...string) {
	t.Helper()
	eventually(t, fmt.Sprintf("renders of %s %v", name, want), func() error {
		if got := renders(t, name); !reflect.DeepEqual(got, want) {
			return fmt.Errorf("renders %v", got)
		}
		return nil
	})
}

func checkRenders(t *testing.T, name string, want ...string) {
	t.Helper()
	if got := renders(t, name); !reflect.DeepEqual(got, want) {
		t.Errorf("renders of %s: %v, want %v", name, got, want)
	}
}

func (h *harness) configMapData(ns, name string) map[string]string {
	h.t.Helper()
	cm := &corev1.ConfigMap{}
	if err := h.get(cm, ns, name); err != nil {
		h.t.Fatalf("ConfigMap %s/%s: %v", ns, name, err)
	}
	return cm.Data
}

// An upgrade renders the chart once, as the upgrade (revision 2,
// .Release.IsUpgrade): the approval gate's preview shows the upgrade's
// objects and hooks, and the approved upgrade applies exactly them, with
// no render of its own; the install before it rendered once too.
func TestIntegrationHelmUpgradeRendersOnceAsTheUpgrade(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.createNamespace("hrev")
	h.createHelmBD("hrev", h.pushChartDir("charts/hrev-v1", revisionsChart), `{"installNamespace":"hrev"}`)
	h.updateBD("hrev", func(bd *rukpakv1alpha1.BundleDeployment) {
		bd.Spec.UpgradeApproval = rukpakv1alpha1.UpgradeApprovalManual
	})
	active := h.waitBD("hrev", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "").Status.ActiveBundle
	h.waitHistory("hrev", h.stockHistory, "1:deployed")
	if got, want := h.configMapData("hrev", "hrev-state"), map[string]string{"revision": "1", "isUpgrade": "false", "message": "hello"}; !reflect.DeepEqual(got, want) {
		t.Errorf("hrev-state after the install: %v, want %v", got, want)
	}
	h.configMapData("hrev", "hrev-installed")
	h.configMapData("hrev", "hrev-hook-r1")
	checkRenders(t, "hrev", "success 1")

	v2 := t.TempDir()
	if err := os.CopyFS(v2, os.DirFS(revisionsChart)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v2, "values.yaml"), []byte("message: v2\nlookup: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := h.pushChartDir("charts/hrev-v2", v2)
	h.updateBD("hrev", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = src })
	// The preview is "pending" while its render runs in the background:
	// waited for until computed.
	bd := h.waitBD("hrev", rukpakv1alpha1.TypePivotPending, metav1.ConditionTrue, rukpakv1alpha1.ReasonAwaitingApproval, "to create")
	pending := bd.Status.PendingBundle
	// Rendered as an install, the preview would change data.message only
	// and list hrev-hook-r1.
	want := fmt.Sprintf("Pivot from bundle %q to bundle %q awaits approval: set annotation core.rukpak.io/approved-bundle=%s to proceed. "+
		"Preview (server-side dry run): 1 to create, 1 to change, 1 to delete, 0 unchanged; create ConfigMap hrev/hrev-upgraded; "+
		"change ConfigMap hrev/hrev-state (data.isUpgrade, data.message, data.revision); delete ConfigMap hrev/hrev-installed; "+
		"hooks would run: ConfigMap hrev/hrev-hook-r2 (pre-upgrade)", active, pending, pending)
	if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypePivotPending); c.Message != want {
		t.Errorf("PivotPending message:\n got %s\nwant %s", c.Message, want)
	}
	checkRenders(t, "hrev", "success 2")

	h.updateBD("hrev", func(bd *rukpakv1alpha1.BundleDeployment) {
		metav1.SetMetaDataAnnotation(&bd.ObjectMeta, rukpakv1alpha1.AnnotationApprovedBundle, pending)
	})
	h.waitHistory("hrev", h.stockHistory, "1:superseded", "2:deployed")
	h.waitBD("hrev", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	if got, want := h.configMapData("hrev", "hrev-state"), map[string]string{"revision": "2", "isUpgrade": "true", "message": "v2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("hrev-state after the upgrade: %v, want %v", got, want)
	}
	if got := h.configMapData("hrev", "hrev-upgraded")["fromRevision"]; got != "1" {
		t.Errorf("hrev-upgraded fromRevision %q, want 1", got)
	}
	h.configMapData("hrev", "hrev-hook-r2")
	h.waitGone(&corev1.ConfigMap{}, "hrev", "hrev-installed")
	// The upgrade applied the preview's render.
	checkRenders(t, "hrev", "success 2")
}

// A chart's lookups read as the ServiceAccount the release installs as,
// in the render the permission preflight checks: forbidden to it (not to
// the provisioner), the check fails, nothing is applied, and the retries
// (controller-runtime's backoff) do not render again; a change of the
// inputs does, and once the ServiceAccount may read, a requested
// reconcile renders again, finds the ConfigMap and installs that render.
func TestIntegrationHelmLookupAsServiceAccount(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.tenantInstaller()
	h.createDocs(`apiVersion: v1
kind: Namespace
metadata: {name: hlook-private}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: probe, namespace: hlook-private}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: hlook, namespace: tenant}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get, list, watch, create, update, patch, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: hlook, namespace: tenant}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: hlook}
subjects: [{kind: ServiceAccount, name: installer, namespace: tenant}]`)
	config := func(message string) string {
		return `{"installNamespace":"tenant","values":"message: ` + message + `\nlookup: {namespace: hlook-private, name: probe}\n"}`
	}
	bd := &rukpakv1alpha1.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "hlook"},
		Spec: rukpakv1alpha1.BundleDeploymentSpec{
			ProvisionerClassName: rukpakv1alpha1.ProvisionerClassHelm,
			ServiceAccount:       &rukpakv1alpha1.ServiceAccountReference{Namespace: "tenant", Name: "installer"},
			Config:               &apiextensionsv1.JSON{Raw: []byte(config("hello"))},
			Template: rukpakv1alpha1.BundleTemplate{Spec: rukpakv1alpha1.BundleSpec{
				ProvisionerClassName: rukpakv1alpha1.ProvisionerClassHelm,
				Source:               h.pushChartDir("charts/hlook", revisionsChart),
			}},
		},
	}
	if err := h.c.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}
	forbidden := `error calling lookup: configmaps "probe" is forbidden: User "system:serviceaccount:tenant:installer" cannot get resource "configmaps" in API group "" in the namespace "hlook-private"`
	h.waitBD("hlook", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInsufficientPermissions,
		"Checking what service account tenant/installer may do failed; nothing was applied: ")
	h.waitBD("hlook", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInsufficientPermissions, forbidden)
	retried := func() {
		t.Helper()
		failed := h.failed(helmController)
		eventually(t, "three more failed reconciles", func() error {
			if n := h.failed(helmController); n < failed+3 {
				return fmt.Errorf("%d failed reconciles, %d before", n, failed)
			}
			return nil
		})
	}
	retried()
	checkRenders(t, "hlook", "failure 1")
	if err := h.get(&corev1.ConfigMap{}, "tenant", "hlook-state"); !apierrors.IsNotFound(err) {
		t.Errorf("hlook-state: %v, want not found", err)
	}
	if got := h.releaseSecrets("hlook"); len(got) != 0 {
		t.Errorf("release records %v, want none", got)
	}

	// New inputs, rendered again (and refused again), once.
	h.setConfig("hlook", config("changed"))
	waitRenders(t, "hlook", "failure 2")
	retried()
	checkRenders(t, "hlook", "failure 2")

	h.createDocs(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: hlook-read, namespace: hlook-private}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: hlook-read, namespace: hlook-private}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: hlook-read}
subjects: [{kind: ServiceAccount, name: installer, namespace: tenant}]`)
	h.updateBD("hlook", func(bd *rukpakv1alpha1.BundleDeployment) {
		metav1.SetMetaDataAnnotation(&bd.ObjectMeta, rukpakv1alpha1.AnnotationReconcileRequestedAt, "granted")
	})
	h.waitBD("hlook", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	h.waitHistory("hlook", h.stockHistory, "1:deployed")
	if got := h.configMapData("tenant", "hlook-lookup")["found"]; got != "probe" {
		t.Errorf("the lookup found %q, want probe", got)
	}
	// The install applied the render its check saw.
	checkRenders(t, "hlook", "failure 2", "success 1")
}
