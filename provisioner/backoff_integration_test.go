package provisioner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testfiles"
	"github.com/rukpak-dev/rukpak/provisioner"
	"github.com/rukpak-dev/rukpak/provisioner/bundledeployment"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/helm/install"
	"github.com/rukpak-dev/rukpak/provisioner/metrics"
)

// backoffHarness is a harness whose failing installs back off from base.
func backoffHarness(t *testing.T, base, limit time.Duration) *harness {
	return newHarnessWith(t, func(o *provisioner.Options) { o.RetryBase, o.RetryMax = base, limit })
}

// role is a Role manifest in namespace default.
func role(name string) string {
	return fmt.Sprintf("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: %s\n  namespace: default\nrules: []\n", name)
}

// widget is a custom resource of widgetCRD's kind, which no API server
// serves until that CRD is created.
const widget = "apiVersion: widgets.example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: default\n"

// withoutRetry is a failed install's Installed message without the
// announcement of the next attempt it ends with.
func withoutRetry(msg string) string {
	if i := strings.LastIndex(msg, "; next attempt in "); i >= 0 {
		if _, _, ok := bundledeployment.ParseRetry(msg); ok {
			return msg[:i]
		}
	}
	return msg
}

// announcement is what one failed attempt announced.
type announcement struct {
	in time.Duration
	at time.Time
}

func (a announcement) String() string {
	return fmt.Sprintf("in %s at %s", a.in, a.at.Format(time.RFC3339))
}

// announced returns the next attempt bd's Installed condition announces;
// false unless it is a failed install's.
func (h *harness) announced(name string) (announcement, bool) {
	c := conditions.Get(h.bd(name).Status.Conditions, rukpakv1alpha1.TypeInstalled)
	if c == nil || c.Status != metav1.ConditionFalse {
		return announcement{}, false
	}
	in, at, ok := bundledeployment.ParseRetry(c.Message)
	return announcement{in, at}, ok
}

// waitAttempts waits until bd's failing install has been attempted n more
// times: each attempt announces a later next attempt.
func (h *harness) waitAttempts(name string, n int) {
	h.t.Helper()
	last, _ := h.announced(name)
	attempts := 0
	eventually(h.t, fmt.Sprintf("%d more attempts of %s", n, name), func() error {
		a, ok := h.announced(name)
		if ok && a.at.After(last.at) {
			last, attempts = a, attempts+1
		}
		if attempts < n {
			return fmt.Errorf("%d more attempts announced (last %s)", attempts, last)
		}
		return nil
	})
}

// TestIntegrationInstallBackoff: a failing install is attempted again
// after the base, then after twice as long each time, never before the
// time its condition announced, although events of its installed objects
// (a Role, edited after every attempt) bring it back to the reconciler in
// between. Asserted on what the attempts announce, not on how fast they
// come.
func TestIntegrationInstallBackoff(t *testing.T) {
	t.Parallel()
	const base = 2 * time.Second
	h := backoffHarness(t, base, time.Hour)
	ctx := context.Background()

	// Another BundleDeployment installs a Role first, so Roles are
	// watched: the failing one's Role, applied before the Widget fails,
	// brings events.
	if err := h.c.Create(ctx, newBD("bo-helper", h.pushBundle("bo-helper", map[string]string{"manifests/role.yaml": role("bo-helper")}))); err != nil {
		t.Fatal(err)
	}
	h.waitBD("bo-helper", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")

	src := h.pushBundle("bo-failing", map[string]string{"manifests/role.yaml": role("bo-failing"), "manifests/widget.yaml": widget})
	if err := h.c.Create(ctx, newBD("bo-failing", src)); err != nil {
		t.Fatal(err)
	}
	var seen []announcement
	edits := 0
	eventually(t, "four announced attempts", func() error {
		a, ok := h.announced("bo-failing")
		if ok && (len(seen) == 0 || !a.at.Equal(seen[len(seen)-1].at)) {
			seen = append(seen, a)
			// An event of an installed object right after the failure.
			r := &rbacv1.Role{}
			if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "bo-failing"}, r); err == nil {
				metav1.SetMetaDataLabel(&r.ObjectMeta, "edit", fmt.Sprint(len(seen)))
				if err := h.c.Update(ctx, r); err == nil {
					edits++
				}
			}
		}
		if len(seen) < 4 {
			return fmt.Errorf("announced so far: %v", seen)
		}
		return nil
	})
	if edits == 0 {
		t.Fatal("the failing install's Role was never there to edit: no events of installed objects were tested")
	}
	c := conditions.Get(h.bd("bo-failing").Status.Conditions, rukpakv1alpha1.TypeInstalled)
	if c.Reason != rukpakv1alpha1.ReasonInstallFailed {
		t.Errorf("reason %s, want %s (unchanged by the backoff)", c.Reason, rukpakv1alpha1.ReasonInstallFailed)
	}
	if seen[0].in != base {
		t.Errorf("the first failure announced a retry in %s, want %s", seen[0].in, base)
	}
	for i := 1; i < len(seen); i++ {
		prev, cur := seen[i-1], seen[i]
		// Each attempt doubles the wait: one attempt per announcement,
		// none unseen and none extra.
		if cur.in != 2*prev.in {
			t.Errorf("attempt %d announced %s after %s: not one doubling (an attempt came between, or the backoff reset)", i+2, cur.in, prev.in)
		}
		// When attempt i+2 ran, as it announced (times are in whole
		// seconds): not before attempt i+1 said it would.
		if ran := cur.at.Add(-cur.in); ran.Before(prev.at.Add(-time.Second)) {
			t.Errorf("attempt %d ran at %s, before the announced %s", i+2, ran.Format(time.RFC3339), prev.at.Format(time.RFC3339))
		}
	}
	t.Logf("announced: %v; Role edited %d times", seen, edits)
}

// TestIntegrationInstallRetriesOnNewCRD: a failing install missing a kind
// waits an hour, but is installed as soon as a CRD of that kind's group
// appears.
func TestIntegrationInstallRetriesOnNewCRD(t *testing.T) {
	t.Parallel()
	h := backoffHarness(t, time.Hour, time.Hour)
	ctx := context.Background()
	src := h.pushBundle("bo-crd", map[string]string{"manifests/cm.yaml": configMap("bo-crd", "v"), "manifests/widget.yaml": widget})
	if err := h.c.Create(ctx, newBD("bo-crd", src)); err != nil {
		t.Fatal(err)
	}
	var first announcement
	eventually(t, "a failed attempt announcing the next", func() error {
		var ok bool
		if first, ok = h.announced("bo-crd"); !ok {
			return fmt.Errorf("no announcement yet")
		}
		return nil
	})
	if first.in != time.Hour {
		t.Fatalf("announced a retry in %s, want 1h", first.in)
	}
	h.createDocs(widgetCRD)
	h.waitBD("bo-crd", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	if now := time.Now(); !now.Before(first.at) {
		t.Fatalf("installed at %s, not before the announced attempt at %s", now, first.at)
	}
	w := &unstructured.Unstructured{}
	w.SetAPIVersion("widgets.example.com/v1")
	w.SetKind("Widget")
	testenv.MustNotError(t, h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "w"}, w), "reading the installed Widget")
}

// thingChart renders one object whose kind its values choose; by default
// a Widget, which no API server serves here.
func thingChart(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "thing")
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: thing\nversion: 0.1.0\n",
		"values.yaml": "apiVersion: widgets.example.com/v1\nkind: Widget\n",
		"templates/thing.yaml": `apiVersion: {{ .Values.apiVersion }}
kind: {{ .Values.kind }}
metadata:
  name: {{ .Release.Name }}-thing
{{- if eq .Values.kind "ConfigMap" }}
data: {from: values}
{{- end }}
`,
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		testenv.MustNotError(t, os.MkdirAll(filepath.Dir(p), 0o755), "creating %s", filepath.Dir(p))
		testenv.MustNotError(t, os.WriteFile(p, []byte(content), 0o600), "writing %s", p)
	}
	return dir
}

// TestIntegrationInstallRetriesOnValuesChange: a chart failing with the
// values it reads waits an hour, but is installed as soon as its values
// source changes.
func TestIntegrationInstallRetriesOnValuesChange(t *testing.T) {
	t.Parallel()
	h := backoffHarness(t, time.Hour, time.Hour)
	ctx := context.Background()
	values := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "bo-values", Labels: map[string]string{install.LabelValuesSource: "true"}},
		Data:       map[string]string{"values.yaml": "message: still a widget\n"},
	}
	testenv.MustNotError(t, h.c.Create(ctx, values), "creating the values source")
	h.createHelmBD("bo-values", h.pushChartDir("charts/thing", thingChart(t)), `{"installNamespace":"default","valuesFrom":[{"kind":"ConfigMap","name":"bo-values"}]}`)
	var first announcement
	eventually(t, "a failed attempt announcing the next", func() error {
		var ok bool
		if first, ok = h.announced("bo-values"); !ok {
			return fmt.Errorf("no announcement yet: %+v", conditions.Get(h.bd("bo-values").Status.Conditions, rukpakv1alpha1.TypeInstalled))
		}
		return nil
	})
	if first.in != time.Hour {
		t.Fatalf("announced a retry in %s, want 1h", first.in)
	}
	values.Data["values.yaml"] = "apiVersion: v1\nkind: ConfigMap\n"
	testenv.MustNotError(t, h.c.Update(ctx, values), "changing the values source")
	h.waitBD("bo-values", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	if now := time.Now(); !now.Before(first.at) {
		t.Fatalf("installed at %s, not before the announced attempt at %s", now, first.at)
	}
	if _, err := h.getCM("bo-values-thing"); err != nil {
		t.Fatalf("the ConfigMap the new values render: %v", err)
	}
}

// TestIntegrationMissingKindNamesDependencies: a registry+v1 bundle that
// declares dependencies and carries a kind nobody serves fails with a
// message naming the missing kind and the declared dependencies, on every
// attempt; and its retries do not load the bundle's content again to say
// so (the objects come from the decoded-object cache, the explanation from
// the first attempt).
func TestIntegrationMissingKindNamesDependencies(t *testing.T) {
	// Not parallel: it counts the steps of every reconcile in the process.
	h := backoffHarness(t, time.Second, time.Hour)
	ctx := context.Background()
	files := testfiles.Read(t, filepath.Join(testenv.RepoRoot(), "test/testdata/bundles/registry-v1/etcd-0.9.4"), "")
	files["metadata/dependencies.yaml"] = "dependencies:\n- type: olm.package\n  value:\n    packageName: prometheus\n    version: \">=0.27.0\"\n"
	files["manifests/servicemonitor.yaml"] = "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: etcd\nspec:\n  endpoints:\n  - port: metrics\n  selector: {}\n"
	bd := newBD("etcd-deps", h.pushBundle("etcd-deps", files))
	bd.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	bd.Spec.Template.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	if err := h.c.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}
	const want = `required resource not found: `
	const deps = `; the bundle declares dependencies: olm.package prometheus (>=0.27.0)`
	check := func(when string) {
		t.Helper()
		c := conditions.Get(h.bd(bd.Name).Status.Conditions, rukpakv1alpha1.TypeInstalled)
		msg := withoutRetry(c.Message)
		if c.Status != metav1.ConditionFalse || c.Reason != rukpakv1alpha1.ReasonInstallFailed || !strings.HasPrefix(msg, want) ||
			!strings.Contains(msg, `"ServiceMonitor"`) || !strings.HasSuffix(msg, deps) {
			t.Errorf("%s: Installed %s/%s %q, want InstallFailed %q... naming the ServiceMonitor and ending %q", when, c.Status, c.Reason, c.Message, want, deps)
		}
	}
	h.waitBD(bd.Name, rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInstallFailed, deps)
	check("first attempt")
	before := metrics.Steps()
	h.waitAttempts(bd.Name, 2)
	check("after two more attempts")
	if got := stepsSince(before); got[metrics.StepLoad] != 0 || got[metrics.StepDecode] != 0 {
		t.Errorf("two retries loaded the content %v times and decoded it %v times, want neither", got[metrics.StepLoad], got[metrics.StepDecode])
	}
}
