package provisioner_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	helmstorage "helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/helm/install"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// hooksChart is this repository's test chart with crds/ and hooks.
var hooksChart = filepath.Join(testenv.RepoRoot(), "test", "testdata", "charts", "hooks")

// pushChartDir pushes a bundle image of a chart directory.
func (h *harness) pushChartDir(repo, dir string) rukpakv1alpha1.BundleSource {
	h.t.Helper()
	h.reg.MustPush(h.t, h.reg.Ref(repo+":v1"), testregistry.Image(h.t, testregistry.LayerFromDir(h.t, dir, "")))
	return rukpakv1alpha1.BundleSource{
		Type:  rukpakv1alpha1.SourceTypeImage,
		Image: &rukpakv1alpha1.ImageSource{Ref: h.reg.Ref(repo + ":v1"), CertificateData: string(h.reg.CAPEM)},
	}
}

// createHelmBD creates a helm-class BundleDeployment of src with config.
func (h *harness) createHelmBD(name string, src rukpakv1alpha1.BundleSource, config string) {
	h.t.Helper()
	bd := &rukpakv1alpha1.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: rukpakv1alpha1.BundleDeploymentSpec{
			ProvisionerClassName: rukpakv1alpha1.ProvisionerClassHelm,
			Config:               &apiextensionsv1.JSON{Raw: []byte(config)},
			Template: rukpakv1alpha1.BundleTemplate{Spec: rukpakv1alpha1.BundleSpec{
				ProvisionerClassName: rukpakv1alpha1.ProvisionerClassHelm,
				Source:               src,
			}},
		},
	}
	if err := h.c.Create(context.Background(), bd); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) setConfig(name, config string) {
	h.t.Helper()
	h.updateBD(name, func(bd *rukpakv1alpha1.BundleDeployment) {
		bd.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(config)}
	})
}

func (h *harness) createNamespace(name string) {
	h.t.Helper()
	if err := h.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		h.t.Fatal(err)
	}
}

// stockHistory reads a release's records with Helm's own Secrets driver,
// as `helm history` and `helm get values` do: "revision:status", and each
// revision's values.
func (h *harness) stockHistory(name string) ([]string, []map[string]any, error) {
	cs, err := kubernetes.NewForConfig(h.env.Config)
	if err != nil {
		return nil, nil, err
	}
	hist, err := helmstorage.Init(driver.NewSecrets(cs.CoreV1().Secrets(namespace))).History(name)
	if err != nil {
		return nil, nil, err
	}
	return revisions(hist)
}

// managerHistory reads a release's records as the provisioner does
// (chunked records included).
func (h *harness) managerHistory(name string) ([]string, []map[string]any, error) {
	m, err := release.NewManager(h.env.Config, namespace)
	if err != nil {
		return nil, nil, err
	}
	hist, err := m.History(name)
	if err != nil {
		return nil, nil, err
	}
	return revisions(hist)
}

func revisions(hist []*helmrelease.Release) ([]string, []map[string]any, error) {
	out := make([]string, len(hist))
	vals := make([]map[string]any, len(hist))
	for _, r := range hist {
		if r.Version < 1 || r.Version > len(hist) {
			return nil, nil, fmt.Errorf("revision %d of %d", r.Version, len(hist))
		}
		out[r.Version-1] = fmt.Sprintf("%d:%s", r.Version, r.Info.Status)
		vals[r.Version-1] = r.Config
	}
	return out, vals, nil
}

func (h *harness) waitHistory(name string, read func(string) ([]string, []map[string]any, error), want ...string) []map[string]any {
	h.t.Helper()
	var vals []map[string]any
	eventually(h.t, fmt.Sprintf("release %s history %v", name, want), func() error {
		got, v, err := read(name)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(got, want) {
			// The BundleDeployment says why, when a revision failed.
			bd := &rukpakv1alpha1.BundleDeployment{}
			if err := h.get(bd, "", name); err == nil {
				if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled); c != nil {
					return fmt.Errorf("history %v (Installed %s/%s: %s)", got, c.Status, c.Reason, c.Message)
				}
			}
			return fmt.Errorf("history %v", got)
		}
		vals = v
		return nil
	})
	return vals
}

func (h *harness) get(obj client.Object, ns, name string) error {
	return h.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
}

func (h *harness) waitGone(obj client.Object, ns, name string) {
	h.t.Helper()
	eventually(h.t, fmt.Sprintf("%T %s/%s deleted", obj, ns, name), func() error {
		err := h.get(obj, ns, name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return errors.New("still there")
		}
		return err
	})
}

// checkStamped checks that obj carries what the plain class stamps and
// Helm's ownership metadata of release bd in ns.
func checkStamped(t *testing.T, obj client.Object, bd, ns string) {
	t.Helper()
	if got := obj.GetLabels()[rukpakv1alpha1.LabelOwnerName]; got != bd {
		t.Errorf("%s: owner label %q, want %q", obj.GetName(), got, bd)
	}
	if ref := metav1.GetControllerOf(obj); ref == nil || ref.Kind != "BundleDeployment" || ref.Name != bd {
		t.Errorf("%s: controller %+v, want BundleDeployment %s", obj.GetName(), ref, bd)
	}
	if a := obj.GetAnnotations(); a["meta.helm.sh/release-name"] != bd || a["meta.helm.sh/release-namespace"] != ns {
		t.Errorf("%s: Helm ownership annotations %v", obj.GetName(), a)
	}
}

// TestIntegrationHelmInstall installs hello-world and kube-state-metrics,
// upgrades hello-world in place on a value change and on a change of a
// values ConfigMap, corrects drift on its Deployment, and uninstalls it;
// the release records are read with Helm's own storage driver.
func TestIntegrationHelmInstall(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.createNamespace("hello")
	h.createHelmBD("hello-world", h.pushChartDir("charts/hello-world", filepath.Join(helmTestdata, "hello-world")),
		`{"installNamespace":"hello","values":"replicaCount: 2\n"}`)
	h.waitBD("hello-world", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "Instantiated bundle")

	dep := &appsv1.Deployment{}
	if err := h.get(dep, "hello", "hello-world"); err != nil {
		t.Fatal(err)
	}
	checkStamped(t, dep, "hello-world", "hello")
	if *dep.Spec.Replicas != 2 {
		t.Fatalf("replicas %d, want 2", *dep.Spec.Replicas)
	}
	uid := dep.UID
	vals := h.waitHistory("hello-world", h.stockHistory, "1:deployed")
	if want := map[string]any{"replicaCount": float64(2)}; !reflect.DeepEqual(vals[0], want) {
		t.Fatalf("revision 1 values %v, want %v", vals[0], want)
	}

	// A value change upgrades the same release in place.
	h.setConfig("hello-world", `{"installNamespace":"hello","values":"replicaCount: 3\n"}`)
	vals = h.waitHistory("hello-world", h.stockHistory, "1:superseded", "2:deployed")
	if want := map[string]any{"replicaCount": float64(3)}; !reflect.DeepEqual(vals[1], want) {
		t.Fatalf("revision 2 values %v, want %v", vals[1], want)
	}
	if err := h.get(dep, "hello", "hello-world"); err != nil {
		t.Fatal(err)
	}
	if *dep.Spec.Replicas != 3 || dep.UID != uid {
		t.Fatalf("replicas %d uid %s, want 3 and the same Deployment %s", *dep.Spec.Replicas, dep.UID, uid)
	}
	// The helm CLI reads the release as an admin would.
	t.Log(h.helmCLI("history", "hello-world"))
	helmCLICheck(t, h, "hello-world", map[string]string{
		"get values --revision 1 -o json": `{"replicaCount":2}`,
		"get values -o json":              `{"replicaCount":3}`,
	})
	if got := helmCLIHistory(t, h, "hello-world"); got != "1:superseded 2:deployed" {
		t.Errorf("helm history hello-world: %s, want 1:superseded 2:deployed", got)
	}
	if got := helmCLIList(t, h); got != "hello-world:2:deployed" {
		t.Errorf("helm list: %s, want hello-world:2:deployed", got)
	}

	// Drift on the chart's Deployment is corrected; no new revision.
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":7}}`))
	if err := h.c.Patch(ctx, dep, patch, client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "drift corrected", func() error {
		if err := h.get(dep, "hello", "hello-world"); err != nil {
			return err
		}
		if *dep.Spec.Replicas != 3 {
			return fmt.Errorf("replicas %d", *dep.Spec.Replicas)
		}
		return nil
	})
	if err := h.c.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "hello", Name: "hello-world"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deleted ServiceAccount restored", func() error { return h.get(&corev1.ServiceAccount{}, "hello", "hello-world") })
	h.waitHistory("hello-world", h.stockHistory, "1:superseded", "2:deployed")

	// valuesFrom: a missing ConfigMap, one without the opt-in label (the
	// same message: TestIntegrationHelmValuesFromMessages), then a labelled
	// one, merged under spec.config.values; a change to it upgrades again.
	h.setConfig("hello-world", `{"installNamespace":"hello","values":"replicaCount: 3\n","valuesFrom":[{"kind":"ConfigMap","name":"hello-values"}]}`)
	h.waitBDExact("hello-world", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInstallFailed,
		"spec.config.valuesFrom[0]: ConfigMap rukpak-system/hello-values does not exist, is not labelled core.rukpak.io/helm-values=true, or may not be read by the provisioner")
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "hello-values", Namespace: namespace},
		Data:       map[string]string{"values.yaml": "replicaCount: 9\nservice:\n  port: 8080\n"},
	}
	if err := h.c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	cm.Labels = map[string]string{install.LabelValuesSource: "true"}
	if err := h.c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	vals = h.waitHistory("hello-world", h.stockHistory, "1:superseded", "2:superseded", "3:deployed")
	if want := map[string]any{"replicaCount": float64(3), "service": map[string]any{"port": float64(8080)}}; !reflect.DeepEqual(vals[2], want) {
		t.Fatalf("revision 3 values %v, want %v", vals[2], want)
	}
	svc := &corev1.Service{}
	if err := h.get(svc, "hello", "hello-world"); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Ports[0].Port != 8080 {
		t.Fatalf("service port %d, want 8080", svc.Spec.Ports[0].Port)
	}
	cm.Data["values.yaml"] = "service:\n  port: 9090\n"
	if err := h.c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	h.waitHistory("hello-world", h.stockHistory, "1:superseded", "2:superseded", "3:superseded", "4:deployed")
	if err := h.get(svc, "hello", "hello-world"); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Ports[0].Port != 9090 {
		t.Fatalf("service port %d, want 9090", svc.Spec.Ports[0].Port)
	}
	h.waitBDExact("hello-world", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded,
		fmt.Sprintf("Instantiated bundle %q successfully", h.bd("hello-world").Status.ActiveBundle))

	// kube-state-metrics, from a chart archive over http.
	srv := newChartServer(t)
	h.createNamespace("ksm")
	h.createHelmBD("ksm", srv.serve("kube-state-metrics.tgz", helmPackage(t, loadTestChart(t, "kube-state-metrics"))), `{"installNamespace":"ksm"}`)
	h.waitBD("ksm", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "Instantiated bundle")
	for _, obj := range []struct {
		obj      client.Object
		ns, name string
	}{
		{&appsv1.Deployment{}, "ksm", "ksm-kube-state-metrics"},
		{&corev1.Service{}, "ksm", "ksm-kube-state-metrics"},
		{&corev1.ServiceAccount{}, "ksm", "ksm-kube-state-metrics"},
		{clusterRole(), "", "ksm-kube-state-metrics"},
	} {
		if err := h.get(obj.obj, obj.ns, obj.name); err != nil {
			t.Fatal(err)
		}
		checkStamped(t, obj.obj, "ksm", "ksm")
	}
	h.waitHistory("ksm", h.stockHistory, "1:deployed")

	// Uninstall removes the release's objects and records.
	if err := h.c.Delete(ctx, h.bd("hello-world")); err != nil {
		t.Fatal(err)
	}
	h.waitGone(&appsv1.Deployment{}, "hello", "hello-world")
	h.waitGone(&corev1.Service{}, "hello", "hello-world")
	h.waitGone(&corev1.ServiceAccount{}, "hello", "hello-world")
	h.waitGone(&rukpakv1alpha1.BundleDeployment{}, "", "hello-world")
	if _, _, err := h.stockHistory("hello-world"); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Fatalf("release records after uninstall: %v", err)
	}
}

func clusterRole() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("rbac.authorization.k8s.io/v1")
	u.SetKind("ClusterRole")
	return u
}

// TestIntegrationHelmHooksAndCRDs: crds/ is installed first and kept on
// uninstall; ConfigMap hooks run in weight order and are deleted per
// policy; a hook that fails fails the upgrade, keeps the deployed revision
// and is named in the condition; a later change upgrades again.
func TestIntegrationHelmHooksAndCRDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.createNamespace("hooks")
	h.createHelmBD("hooks", h.pushChartDir("charts/hooks", hooksChart), `{"installNamespace":"hooks"}`)
	h.waitBD("hooks", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "Instantiated bundle")

	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := h.get(crd, "", "gadgets.hooks.test.rukpak.io"); err != nil {
		t.Fatal(err)
	}
	if metav1.GetControllerOf(crd) != nil {
		t.Fatalf("crds/ CRD has a controller: %+v", metav1.GetControllerOf(crd))
	}
	gadget := &unstructured.Unstructured{}
	gadget.SetAPIVersion("hooks.test.rukpak.io/v1")
	gadget.SetKind("Gadget")
	if err := h.get(gadget, "hooks", "hooks-gadget"); err != nil {
		t.Fatal(err)
	}
	checkStamped(t, gadget, "hooks", "hooks")
	first := &corev1.ConfigMap{}
	if err := h.get(first, "hooks", "hooks-hook-first"); err != nil {
		t.Fatalf("before-hook-creation hook: %v", err)
	}
	if err := h.get(&corev1.ConfigMap{}, "hooks", "hooks-hook-second"); !apierrors.IsNotFound(err) {
		t.Fatalf("hook-succeeded hook after success: %v, want deleted", err)
	}
	m, err := release.NewManager(h.env.Config, namespace)
	if err != nil {
		t.Fatal(err)
	}
	checkHookOrder := func(version int) {
		t.Helper()
		hist, err := m.History("hooks")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range hist {
			if r.Version != version {
				continue
			}
			run := map[string]helmrelease.HookExecution{}
			for _, hk := range r.Hooks {
				run[hk.Name] = hk.LastRun
			}
			a, b := run["hooks-hook-first"], run["hooks-hook-second"]
			if a.Phase != helmrelease.HookPhaseSucceeded || b.Phase != helmrelease.HookPhaseSucceeded || b.StartedAt.Before(a.CompletedAt) {
				t.Fatalf("revision %d hooks: first %+v, second %+v: want both succeeded, weight -1 before weight 1", version, a, b)
			}
			return
		}
		t.Fatalf("no revision %d", version)
	}
	checkHookOrder(1)
	// Rendered for this cluster: its version, and the kinds of crds/.
	version, err := discovery.NewDiscoveryClientForConfigOrDie(h.env.Config).ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	rendered := &corev1.ConfigMap{}
	if err := h.get(rendered, "hooks", "hooks-config"); err != nil {
		t.Fatal(err)
	}
	if got := rendered.Data; got["kubeVersion"] != version.GitVersion || got["servesGadgets"] != "true" {
		t.Fatalf("capabilities rendered %v, want kubeVersion %s and servesGadgets true", got, version.GitVersion)
	}

	// A pre-upgrade hook the API server refuses fails the upgrade: the
	// revision before stays deployed and its objects as they were.
	h.setConfig("hooks", `{"installNamespace":"hooks","values":"failHook: true\nmessage: v2\n"}`)
	h.waitBDExact("hooks", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonUpgradeFailed,
		`upgrading release "hooks": pre-upgrade hook ConfigMap hooks-Hook_Invalid (hooks/templates/hooks.yaml) failed: `+
			`Upgrade "hooks" failed: pre-upgrade hooks failed: warning: Hook pre-upgrade hooks/templates/hooks.yaml failed: 1 error occurred: `+
			`* ConfigMap "hooks-Hook_Invalid" is invalid: metadata.name: Invalid value: "hooks-Hook_Invalid": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*') `+
			`(revision 2 failed; retried with the same chart and values after 5m0s)`)
	h.waitHistory("hooks", h.stockHistory, "1:deployed", "2:failed")
	cfg := &corev1.ConfigMap{}
	if err := h.get(cfg, "hooks", "hooks-config"); err != nil {
		t.Fatal(err)
	}
	if cfg.Data["message"] != "hello" {
		t.Fatalf("message %q after the failed upgrade, want the deployed revision's hello", cfg.Data["message"])
	}

	// A change upgrades again.
	h.setConfig("hooks", `{"installNamespace":"hooks","values":"message: v3\n"}`)
	h.waitHistory("hooks", h.stockHistory, "1:superseded", "2:failed", "3:deployed")
	checkHookOrder(3)
	if err := h.get(cfg, "hooks", "hooks-config"); err != nil || cfg.Data["message"] != "v3" {
		t.Fatalf("message %q (%v), want v3", cfg.Data["message"], err)
	}

	// Values back to the chart's defaults, then a pivot (a new template, so
	// a new Bundle) upgrades the same release.
	old := h.bd("hooks").Status.ActiveBundle
	v2 := t.TempDir()
	if err := os.CopyFS(v2, os.DirFS(hooksChart)); err != nil {
		t.Fatal(err)
	}
	values, err := os.ReadFile(filepath.Join(v2, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v2, "values.yaml"), []byte(strings.Replace(string(values), "message: hello", "message: pivoted", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	src := h.pushChartDir("charts/hooks-v2", v2)
	h.setConfig("hooks", `{"installNamespace":"hooks"}`)
	h.waitHistory("hooks", h.stockHistory, "1:superseded", "2:failed", "3:superseded", "4:deployed")
	h.updateBD("hooks", func(bd *rukpakv1alpha1.BundleDeployment) {
		bd.Spec.Template.Spec.Source = src
	})
	h.waitHistory("hooks", h.stockHistory, "1:superseded", "2:failed", "3:superseded", "4:superseded", "5:deployed")
	if err := h.get(cfg, "hooks", "hooks-config"); err != nil || cfg.Data["message"] != "pivoted" {
		t.Fatalf("message %q (%v) after the pivot, want pivoted", cfg.Data["message"], err)
	}
	eventually(t, "the pivot to finish", func() error {
		active := h.bd("hooks").Status.ActiveBundle
		if active == old || active == "" {
			return fmt.Errorf("active bundle %q", active)
		}
		_, err := h.getBundle(old)
		return err
	})

	// A hook Job that never completes (no pods run here) fails the install
	// once spec.config.timeout has passed, naming the Job.
	h.createNamespace("slow")
	h.createHelmBD("slow", src, `{"installNamespace":"slow","timeout":"2s","values":"jobs: true\nconfigMapHooks: false\n"}`)
	h.waitBDExact("slow", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInstallFailed,
		`installing release "slow": pre-install,pre-upgrade hook Job slow-job-a (hooks/templates/jobs.yaml) failed: `+
			`Release "slow" failed: failed pre-install: 1 error occurred: * timed out waiting for the condition `+
			`(revision 1 failed; retried with the same chart and values after 5m0s)`)
	h.waitHistory("slow", h.stockHistory, "1:failed")
	if err := h.get(&corev1.ConfigMap{}, "slow", "slow-config"); !apierrors.IsNotFound(err) {
		t.Fatalf("the release's ConfigMap after a failed pre-install hook: %v, want none", err)
	}
	if err := h.c.Delete(ctx, h.bd("slow")); err != nil {
		t.Fatal(err)
	}
	h.waitGone(&rukpakv1alpha1.BundleDeployment{}, "", "slow")
	if left := h.releaseSecrets("slow"); len(left) > 0 {
		t.Fatalf("release Secrets left after uninstall: %v", left)
	}

	// lookup reads the cluster, but not the provisioner's namespace.
	h.createNamespace("peek")
	if err := h.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "peek", Name: "visible"}}); err != nil {
		t.Fatal(err)
	}
	h.createHelmBD("peek", src, `{"installNamespace":"peek","values":"configMapHooks: false\nlookup: {namespace: peek, name: visible}\n"}`)
	h.waitBD("peek", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "Instantiated bundle")
	found := &corev1.ConfigMap{}
	if err := h.get(found, "peek", "peek-lookup"); err != nil || found.Data["found"] != "visible" {
		t.Fatalf("lookup in the install namespace found %q (%v), want visible", found.Data["found"], err)
	}
	h.setConfig("peek", `{"installNamespace":"peek","values":"configMapHooks: false\nlookup: {namespace: rukpak-system, name: anything}\n"}`)
	bd := h.waitBD("peek", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonUpgradeFailed,
		`/api/v1/namespaces/rukpak-system/secrets/anything": a chart's lookup may not read the provisioner's namespace "rukpak-system"`)
	if msg := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled).Message; !strings.HasPrefix(msg, `upgrading release "peek": template: hooks/templates/objects.yaml:23:42: executing "hooks/templates/objects.yaml" at <lookup "v1" "Secret" .namespace .name>: error calling lookup: Get "https://`) {
		t.Fatalf("Installed: %s", msg)
	}
	if err := h.c.Delete(ctx, h.bd("peek")); err != nil {
		t.Fatal(err)
	}
	h.waitGone(&rukpakv1alpha1.BundleDeployment{}, "", "peek")

	// Uninstall: everything of the release goes, crds/ stays.
	if err := h.c.Delete(ctx, h.bd("hooks")); err != nil {
		t.Fatal(err)
	}
	h.waitGone(&corev1.ConfigMap{}, "hooks", "hooks-config")
	h.waitGone(gadget, "hooks", "hooks-gadget")
	h.waitGone(&rukpakv1alpha1.BundleDeployment{}, "", "hooks")
	if err := h.get(crd, "", "gadgets.hooks.test.rukpak.io"); err != nil || !crd.DeletionTimestamp.IsZero() {
		t.Fatalf("crds/ CRD after uninstall: %v, deletion %v", err, crd.DeletionTimestamp)
	}
}

// bigChart writes a chart whose release record (its files, and the
// manifest holding them again) cannot fit in one Secret even gzipped: three
// ConfigMaps of 700 KB of random text each.
func bigChart(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	rnd := rand.New(rand.NewChaCha8([32]byte{1}))
	files := map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: big\nversion: 1.0.0\n",
		"templates/blobs.yaml": `{{- range $i := until 3 }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: big-{{ $i }}
data:
  blob: {{ $.Files.Get (printf "files/blob-%d.txt" $i) | quote }}
{{- end }}
`,
	}
	for i := range 3 {
		b := make([]byte, 525_000)
		for j := range b {
			b[j] = byte(rnd.Uint32())
		}
		files[fmt.Sprintf("files/blob-%d.txt", i)] = base64.StdEncoding.EncodeToString(b)
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// releaseSecrets names the Secrets of the provisioner's namespace that
// hold records of release name (indexes and chunks).
func (h *harness) releaseSecrets(name string) []string {
	h.t.Helper()
	var secrets corev1.SecretList
	if err := h.c.List(context.Background(), &secrets, client.InNamespace(namespace)); err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, s := range secrets.Items {
		if strings.HasPrefix(s.Name, "sh.helm.release.v1."+name+".") {
			out = append(out, s.Name)
		}
	}
	return out
}

// TestIntegrationHelmChunkedRelease: a chart whose release record is
// larger than one Secret installs, upgrades and uninstalls.
func TestIntegrationHelmChunkedRelease(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()

	h.createNamespace("big")
	h.createHelmBD("big", h.pushChartDir("charts/big", bigChart(t)), `{"installNamespace":"big"}`)
	h.waitBD("big", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "Instantiated bundle")
	index := &corev1.Secret{}
	if err := h.get(index, namespace, "sh.helm.release.v1.big.v1"); err != nil {
		t.Fatal(err)
	}
	if index.Data["chunks"] == nil {
		t.Fatalf("record of revision 1 is not chunked: keys %v", keys(index.Data))
	}
	t.Logf("chunked record: %s chunks, %s bytes", index.Data["chunks"], index.Data["bytes"])
	// Helm's own driver lists the revision (a placeholder record).
	h.waitHistory("big", h.stockHistory, "1:deployed")
	h.setConfig("big", `{"installNamespace":"big","values":"revision: 2\n"}`)
	vals := h.waitHistory("big", h.managerHistory, "1:superseded", "2:deployed")
	if want := map[string]any{"revision": float64(2)}; !reflect.DeepEqual(vals[1], want) {
		t.Fatalf("revision 2 values %v, want %v", vals[1], want)
	}
	h.waitHistory("big", h.stockHistory, "1:superseded", "2:deployed")
	if err := h.c.Delete(ctx, h.bd("big")); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		h.waitGone(&corev1.ConfigMap{}, "big", fmt.Sprintf("big-%d", i))
	}
	h.waitGone(&rukpakv1alpha1.BundleDeployment{}, "", "big")
	if left := h.releaseSecrets("big"); len(left) > 0 {
		t.Fatalf("release Secrets left after uninstall: %v", left)
	}
}

// TestIntegrationHelmPrometheusOperatorCRDs: prometheus-operator-crds (4.4
// MB of CRDs) installs, upgrades and uninstalls through the helm class. (A
// test of its own, apart from the chunked release: each takes minutes, and
// they run in parallel.)
func TestIntegrationHelmPrometheusOperatorCRDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	index := &corev1.Secret{}

	h.createNamespace("prom")
	h.createHelmBD("prom-crds", h.pushChartDir("charts/prometheus-operator-crds", filepath.Join(helmTestdata, "prometheus-operator-crds")), `{"installNamespace":"prom"}`)
	h.waitBD("prom-crds", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "Instantiated bundle")
	if err := h.get(index, namespace, "sh.helm.release.v1.prom-crds.v1"); err != nil {
		t.Fatal(err)
	}
	t.Logf("prometheus-operator-crds record: keys %v, release %d bytes", keys(index.Data), len(index.Data["release"]))
	h.waitHistory("prom-crds", h.stockHistory, "1:deployed")
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := h.get(crd, "", "probes.monitoring.coreos.com"); err != nil {
		t.Fatal(err)
	}
	checkStamped(t, crd, "prom-crds", "prom")

	h.setConfig("prom-crds", `{"installNamespace":"prom","values":"crds:\n  annotations:\n    rukpak.test/revision: \"2\"\n"}`)
	vals := h.waitHistory("prom-crds", h.managerHistory, "1:superseded", "2:deployed")
	if want := map[string]any{"crds": map[string]any{"annotations": map[string]any{"rukpak.test/revision": "2"}}}; !reflect.DeepEqual(vals[1], want) {
		t.Fatalf("revision 2 values %v, want %v", vals[1], want)
	}
	if err := h.get(crd, "", "probes.monitoring.coreos.com"); err != nil {
		t.Fatal(err)
	}
	if got := crd.Annotations["rukpak.test/revision"]; got != "2" {
		t.Fatalf("CRD annotation after the upgrade %q, want 2", got)
	}

	var installed apiextensionsv1.CustomResourceDefinitionList
	if err := h.c.List(ctx, &installed, client.MatchingLabels{rukpakv1alpha1.LabelOwnerName: "prom-crds"}); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(installed.Items))
	for _, crd := range installed.Items {
		names = append(names, crd.Name)
	}
	if len(names) == 0 {
		t.Fatal("no CRD labelled as installed by prom-crds")
	}
	h.waitCRDStorage(names...)
	if err := h.c.Delete(ctx, h.bd("prom-crds")); err != nil {
		t.Fatal(err)
	}
	h.waitGone(&apiextensionsv1.CustomResourceDefinition{}, "", "probes.monitoring.coreos.com")
	h.waitGone(&rukpakv1alpha1.BundleDeployment{}, "", "prom-crds")
	if left := h.releaseSecrets("prom-crds"); len(left) > 0 {
		t.Fatalf("release Secrets left after uninstall: %v", left)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
