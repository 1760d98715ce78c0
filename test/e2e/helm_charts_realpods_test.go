package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testfiles"
	"github.com/rukpak-dev/rukpak/internal/testgit"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
)

// sharedChart is a chart of the shared test data (../shared/testdata/helm,
// unmodified third-party charts); the test skips without it.
func sharedChart(t *testing.T, name string) string {
	t.Helper()
	dir := testenv.SharedTestdata("helm", name)
	if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err != nil {
		t.Skipf("shared test data not available: %v", err)
	}
	return dir
}

// helmBD is a helm-class BundleDeployment; serviceAccount ("" for none) is
// NAMESPACE/NAME.
func helmBD(name, ns, serviceAccount, values, source string) string {
	sa := ""
	if serviceAccount != "" {
		saNS, saName, _ := strings.Cut(serviceAccount, "/")
		sa = fmt.Sprintf("\n  serviceAccount: {name: %s, namespace: %s}", saName, saNS)
	}
	return fmt.Sprintf(`apiVersion: core.rukpak.io/v1alpha1
kind: BundleDeployment
metadata:
  name: %s
spec:
  provisionerClassName: core-rukpak-io-helm%s
  config:
    installNamespace: %s
    values: |
%s
  template:
    spec:
      source:
        %s
      provisionerClassName: core-rukpak-io-helm
`, name, sa, ns, indent(values, 6), source)
}

// waitLong is waitFor for more than the two minutes one kubectl may take:
// `kubectl wait` in rounds until timeout.
func waitLong(t *testing.T, resource, condition string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, resource+" "+condition, func() error {
		_, errOut, err := kubectl(t, "", "wait", resource, "--for="+condition, "--timeout=60s")
		if err != nil {
			status, _, _ := kubectl(t, "", "get", resource, "-o", "jsonpath={.status.conditions}")
			return fmt.Errorf("%w: %s %s", err, errOut, status)
		}
		return nil
	})
}

// helmCLI runs the helm CLI that hack/testbin.sh builds (go.mod's Helm) as
// an admin reading the provisioner's release records.
func helmCLI(t *testing.T, args ...string) string {
	t.Helper()
	dir, err := testbin(testenv.RepoRoot(), "helm")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cmd := exec.Command(filepath.Join(dir, "helm"), append([]string{"--kubeconfig", suite.kubeconfig, "-n", "rukpak-system"}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// helmHistory is `helm history release` as "revision:status ...".
func helmHistory(t *testing.T, release string) string {
	t.Helper()
	var revs []struct {
		Revision int    `json:"revision"`
		Status   string `json:"status"`
	}
	if err := json.Unmarshal([]byte(helmCLI(t, "history", release, "-o", "json")), &revs); err != nil {
		t.Fatalf("helm history -o json: %v", err)
	}
	out := make([]string, len(revs))
	for i, r := range revs {
		out[i] = fmt.Sprintf("%d:%s", r.Revision, r.Status)
	}
	return strings.Join(out, " ")
}

// jobEvent is one watch event of a Job.
type jobEvent struct {
	Type   string `json:"type"`
	Object struct {
		Metadata struct {
			Name              string    `json:"name"`
			CreationTimestamp time.Time `json:"creationTimestamp"`
		} `json:"metadata"`
		Status struct {
			Succeeded      int        `json:"succeeded"`
			CompletionTime *time.Time `json:"completionTime"`
		} `json:"status"`
	} `json:"object"`
}

// jobWatch records the watch events of a namespace's Jobs from a
// resourceVersion on, as the API server sends them: their order is the
// order things happened, which timestamps (whole seconds) cannot tell.
type jobWatch struct {
	cancel context.CancelFunc
	cmd    *exec.Cmd
	out    *os.File
}

func watchJobs(t *testing.T, ns string) *jobWatch {
	t.Helper()
	var list struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	path := "/apis/batch/v1/namespaces/" + ns + "/jobs"
	if err := json.Unmarshal([]byte(mustKubectl(t, "", "get", "--raw", path)), &list); err != nil || list.Metadata.ResourceVersion == "" {
		t.Fatalf("listing Jobs in %s: %v", ns, err)
	}
	out, err := os.Create(filepath.Join(t.TempDir(), "jobs.json"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "kubectl", "get", "--raw", path+"?watch=1&timeoutSeconds=900&resourceVersion="+list.Metadata.ResourceVersion)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+suite.kubeconfig)
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	w := &jobWatch{cancel: cancel, cmd: cmd, out: out}
	t.Cleanup(func() { w.stop(t) })
	return w
}

// stop ends the watch and returns its events in order, as
// "ADDED name", "COMPLETED name" (the first event with a completion
// time) and "DELETED name" (carrying whether it had completed).
func (w *jobWatch) stop(t *testing.T) []string {
	t.Helper()
	if w.cancel == nil {
		return nil
	}
	w.cancel()
	_ = w.cmd.Wait()
	w.cancel = nil
	_ = w.out.Close()
	data, err := os.ReadFile(w.out.Name())
	if err != nil {
		t.Fatal(err)
	}
	var seq []string
	completed := map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var e jobEvent
		if err := dec.Decode(&e); err != nil {
			// A watch cut off mid-event ends with a partial one.
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("decoding the Job watch: %v\n%s", err, data)
			}
			break
		}
		name := e.Object.Metadata.Name
		done := e.Object.Status.CompletionTime != nil && e.Object.Status.Succeeded > 0
		switch e.Type {
		case "ADDED":
			seq = append(seq, "ADDED "+name)
		case "MODIFIED":
			if done && !completed[name] {
				seq = append(seq, "COMPLETED "+name)
			}
		case "DELETED":
			if done && !completed[name] {
				seq = append(seq, "COMPLETED "+name)
			}
			seq = append(seq, "DELETED "+name)
		case "ERROR":
			t.Fatalf("the Job watch failed: %s", data)
		}
		completed[name] = completed[name] || done
	}
	return seq
}

// TestRealPodsSharedCharts runs the shared third-party charts' workloads
// and hooks as real pods, each with the real program its image holds
// where its module can be fetched (internal/nodeimages): the three
// installs run side by side.
func TestRealPodsSharedCharts(t *testing.T) {
	if !suite.realPods {
		t.Skip("the charts' workloads and hook Jobs need pods that run: make test-e2e-node, or E2E_REAL_PODS=1 with the test images loaded")
	}
	shared(t)
	f := newFixtures(t)
	push := func(t *testing.T, name string) string {
		return f.reg.MustPush(t, f.reg.Ref("charts/"+name+":v1"), testregistry.Image(t, testregistry.LayerFromDir(t, sharedChart(t, name), "")))
	}

	t.Run("prometheus-operator-admission-webhook: hook Jobs in order, deleted per policy, as the ServiceAccount; the webhook answers the API server", func(t *testing.T) {
		t.Parallel()
		testAdmissionWebhookChart(t, f, push)
	})
	t.Run("kube-state-metrics: the real kube-state-metrics Ready and serving the cluster's metrics", func(t *testing.T) {
		t.Parallel()
		testKubeStateMetricsChart(t, f, push)
	})
	t.Run("hello-world from git: Ready, upgraded in place to revision 2, drift corrected", func(t *testing.T) {
		t.Parallel()
		testHelloWorldChart(t, f)
	})
}

func testAdmissionWebhookChart(t *testing.T, f *fixtures, push func(*testing.T, string) string) {
	const (
		ns   = "paw"
		name = "prometheus-operator-admission-webhook" // release, and so fullname
	)
	crdsRef, chartRef := push(t, "prometheus-operator-crds"), push(t, "prometheus-operator-admission-webhook")
	mustKubectl(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: paw}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: installer, namespace: paw}\n", "apply", "-f", "-")
	var rbac string
	t.Cleanup(func() {
		// The uninstall runs as the ServiceAccount: its RBAC goes after.
		_, _, _ = kubectl(t, "", "delete", "bd", name, "paw-crds", "--ignore-not-found", "--timeout=2m")
		if rbac != "" {
			_, _, _ = kubectl(t, rbac, "delete", "--ignore-not-found", "-f", "-")
		}
		_, _, _ = kubectl(t, "", "delete", "namespace", ns, "--ignore-not-found", "--wait=false")
	})

	// The webhook answers for PrometheusRules and AlertmanagerConfigs: their
	// CRDs from the prometheus-operator-crds chart, nothing else of it.
	crdValues := "crds:\n"
	for _, c := range []string{"alertmanagers", "podmonitors", "probes", "prometheusagents", "prometheuses", "scrapeconfigs", "servicemonitors", "thanosrulers"} {
		crdValues += "  " + c + ": {enabled: false}\n"
	}
	mustKubectl(t, helmBD("paw-crds", ns, "", crdValues, f.imageSource(crdsRef)), "apply", "-f", "-")

	// The chart's images, built here (quay.io and ghcr.io cannot be
	// pulled); pullPolicy Always would try to. The pod is probed every
	// second, not every 10 (the chart's default): Ready, so Healthy, and
	// rolled in the upgrade seconds after it serves, not up to 10 s later.
	values := `image: {registry: rukpak.test, repository: admission-webhook, tag: v1, pullPolicy: IfNotPresent}
jobs:
  image: {registry: rukpak.test, repository: certgen, tag: v1, pullPolicy: IfNotPresent}
readinessProbe: {periodSeconds: 1}
`
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(valuesFile, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	// Least privilege: the release is installed as paw/installer, granted
	// exactly what rukpakctl rbac prints for the chart with these values
	// (its manifest, its hooks with list and watch on the hook Jobs Helm
	// waits for, and the rules of the chart's own roles).
	rbac = rukpakctlRBAC(t, sharedChart(t, name), "--values", valuesFile, "--release-name", name,
		"--install-namespace", ns, "--service-account", ns+"/installer", "--name", "paw-installer")
	mustKubectl(t, rbac, "apply", "-f", "-")
	waitLong(t, "bd/paw-crds", "condition=Installed", 3*time.Minute)
	waitFor(t, "crd/prometheusrules.monitoring.coreos.com", "condition=Established", time.Minute)

	jobs := watchJobs(t, ns)
	mustKubectl(t, helmBD(name, ns, ns+"/installer", values, f.imageSource(chartRef)), "apply", "-f", "-")
	waitLong(t, "bd/"+name, "condition=Installed", 4*time.Minute)
	waitLong(t, "bd/"+name, "condition=Healthy", 3*time.Minute)
	install := jobs.stop(t)
	checkHookOrder(t, "install", install, name)
	// The pre-install Job made the certificate Secret before the
	// Deployment that mounts it was created; the post-install Job ran
	// after.
	secret := jsonpath(t, "secret/"+name+" -n "+ns, "{.metadata.creationTimestamp}")
	deployed := jsonpath(t, "deployment/"+name+" -n "+ns, "{.metadata.creationTimestamp}")
	if secret > deployed {
		t.Errorf("Secret created %s, after the Deployment %s", secret, deployed)
	}
	checkNoHooksLeft(t, ns, name)
	mustKubectl(t, "", "rollout", "status", "deployment/"+name, "-n", ns, "--timeout=2m")

	// The post-install Job put the Secret's CA into both configurations.
	ca := jsonpath(t, "secret/"+name+" -n "+ns, `{.data.ca\.crt}`)
	for _, kind := range []string{"validatingwebhookconfiguration", "mutatingwebhookconfiguration"} {
		got := jsonpath(t, kind+"/"+name, "{.webhooks[*].clientConfig.caBundle}")
		for _, b := range strings.Fields(got) {
			if b != ca {
				t.Errorf("%s %s: a caBundle is not the Secret's ca.crt", kind, name)
			}
		}
		if got == "" {
			t.Errorf("%s %s: no caBundle", kind, name)
		}
	}
	webhookAnswers(t, ns)

	// A value change upgrades in place: pre-upgrade and post-upgrade Jobs
	// run again (the Secret exists, so the certificate is kept), the pod
	// rolls, and the webhook keeps answering.
	tlsBefore := jsonpath(t, "secret/"+name+" -n "+ns, `{.data.tls\.crt}`)
	jobs = watchJobs(t, ns)
	mustKubectl(t, helmBD(name, ns, ns+"/installer", values+"pod:\n  labels: {revision: \"2\"}\n", f.imageSource(chartRef)), "apply", "-f", "-")
	eventually(t, 4*time.Minute, "revision 2 deployed", func() error {
		if h := helmHistory(t, name); h != "1:superseded 2:deployed" {
			return fmt.Errorf("helm history: %s", h)
		}
		return nil
	})
	waitFor(t, "bd/"+name, "condition=Installed", time.Minute)
	checkHookOrder(t, "upgrade", jobs.stop(t), name)
	checkNoHooksLeft(t, ns, name)
	if got := jsonpath(t, "secret/"+name+" -n "+ns, `{.data.tls\.crt}`); got != tlsBefore {
		t.Error("the pre-upgrade Job replaced the certificate")
	}
	mustKubectl(t, "", "rollout", "status", "deployment/"+name, "-n", ns, "--timeout=2m")
	waitFor(t, "bd/"+name, "condition=Healthy", 2*time.Minute)
	webhookAnswers(t, ns)

	// Uninstall as the ServiceAccount: the release goes; the Secret the
	// create Job made is no object of the release and stays, as with
	// helm uninstall.
	mustKubectl(t, "", "delete", "bd", name, "--timeout=2m")
	for _, r := range []string{"deployment/" + name + " -n " + ns, "service/" + name + " -n " + ns, "validatingwebhookconfiguration/" + name, "mutatingwebhookconfiguration/" + name} {
		if out, _, err := kubectl(t, "", append([]string{"get", "--ignore-not-found", "-o", "name"}, strings.Fields(r)...)...); err != nil || out != "" {
			t.Errorf("%s after the uninstall: %q %v", r, out, err)
		}
	}
	mustKubectl(t, "", "get", "secret/"+name, "-n", ns)
	mustKubectl(t, "", "delete", "bd", "paw-crds", "--timeout=2m")
	waitFor(t, "crd/prometheusrules.monitoring.coreos.com", "delete", 2*time.Minute)
}

// checkHookOrder checks the Jobs' watch events of an install or upgrade:
// the pre-* create Job ran to completion and was deleted (hook-succeeded:
// its ttlSecondsAfterFinished is 60, so no one else deletes it this soon)
// before the post-* patch Job was created, which then completed and was
// deleted too.
func checkHookOrder(t *testing.T, what string, seq []string, name string) {
	t.Helper()
	want := []string{"ADDED " + name + "-create", "COMPLETED " + name + "-create", "DELETED " + name + "-create",
		"ADDED " + name + "-patch", "COMPLETED " + name + "-patch", "DELETED " + name + "-patch"}
	if strings.Join(seq, ", ") != strings.Join(want, ", ") {
		t.Fatalf("hook Jobs of the %s: %q, want %q", what, seq, want)
	}
	t.Logf("hook Jobs of the %s: %s", what, strings.Join(seq, ", "))
}

// checkNoHooksLeft: the hooks' ServiceAccount and roles are deleted per
// their hook-delete-policy (hook-succeeded) once the hooks ran.
func checkNoHooksLeft(t *testing.T, ns, name string) {
	t.Helper()
	out := mustKubectl(t, "", "get", "jobs,serviceaccounts,roles,rolebindings", "-n", ns, "-o", "name")
	out += mustKubectl(t, "", "get", "clusterroles,clusterrolebindings", "-o", "name")
	for _, l := range strings.Fields(out) {
		if strings.HasPrefix(l, "job") || strings.HasSuffix(l, "/"+name+"-aux") {
			t.Errorf("hook object left: %s", l)
		}
	}
}

// webhookAnswers: the API server calls the real webhook through its
// Service with the patched CA: the mutating webhook marks a PrometheusRule
// as validated, the validating one refuses a rule whose PromQL does not
// parse.
func webhookAnswers(t *testing.T, ns string) {
	t.Helper()
	rule := func(expr string) string {
		return fmt.Sprintf(`apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: probe, namespace: %s}
spec:
  groups:
  - name: probe
    rules:
    - alert: Probe
      expr: %q
`, ns, expr)
	}
	// Until kube-proxy routes the Service to a ready pod, calls fail.
	eventually(t, 2*time.Minute, "the webhook to answer a dry-run create", func() error {
		out, errOut, err := kubectl(t, rule("up == 0"), "create", "--dry-run=server", "-f", "-", "-o", `jsonpath={.metadata.annotations.prometheus-operator-validated}`)
		if err != nil || out != "true" {
			return fmt.Errorf("annotation %q: %w %s", out, err, errOut)
		}
		return nil
	})
	// The webhook's answer carries the PromQL parser's error as its cause
	// (the CRD's schema takes any string): the API server reports it.
	_, errOut, err := kubectl(t, rule("sum(up"), "create", "--dry-run=server", "-f", "-")
	if err == nil || !strings.Contains(errOut, `"prometheusrules" is invalid`) || !strings.Contains(errOut, `"Probe": could not parse expression: 1:7: parse error: unclosed left parenthesis`) {
		t.Fatalf("an unparsable rule: %v %s", err, errOut)
	}
}

func testKubeStateMetricsChart(t *testing.T, f *fixtures, push func(*testing.T, string) string) {
	const ns, name = "ksm", "kube-state-metrics"
	ref := push(t, name)
	mustKubectl(t, "", "create", "namespace", ns)
	t.Cleanup(func() {
		_, _, _ = kubectl(t, "", "delete", "bd", name, "--ignore-not-found", "--timeout=2m")
		_, _, _ = kubectl(t, "", "delete", "namespace", ns, "--ignore-not-found", "--wait=false")
	})
	mustKubectl(t, helmBD(name, ns, "", "image: {registry: rukpak.test, repository: kube-state-metrics, tag: v1}\n", f.imageSource(ref)), "apply", "-f", "-")
	waitLong(t, "bd/"+name, "condition=Installed", 3*time.Minute)
	waitLong(t, "bd/"+name, "condition=Healthy", 3*time.Minute)
	mustKubectl(t, "", "rollout", "status", "deployment/"+name, "-n", ns, "--timeout=2m")

	// It lists the cluster through the kubernetes Service with the RBAC
	// the chart grants, and reports its own Deployment.
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DialContext: nodeDial(t)}}
	want := fmt.Sprintf(`kube_deployment_status_replicas_ready{namespace="%s",deployment="%s"} 1`, ns, name)
	eventually(t, 2*time.Minute, "kube-state-metrics to report its Deployment", func() error {
		resp, err := client.Get("http://" + name + "." + ns + ".svc:8080/metrics")
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(want)) {
			return fmt.Errorf("GET /metrics: %s, no %s", resp.Status, want)
		}
		return nil
	})

	mustKubectl(t, "", "delete", "bd", name, "--timeout=2m")
	if out := mustKubectl(t, "", "get", "deployments,services,serviceaccounts", "-n", ns, "-l", "app.kubernetes.io/instance="+name, "-o", "name"); out != "" {
		t.Errorf("left after the uninstall: %s", out)
	}
	if out, _, err := kubectl(t, "", "get", "clusterrole/"+name, "clusterrolebinding/"+name, "--ignore-not-found", "-o", "name"); err != nil || out != "" {
		t.Errorf("cluster RBAC left after the uninstall: %q %v", out, err)
	}
}

func testHelloWorldChart(t *testing.T, f *fixtures) {
	const ns, name = "hello", "hello-world-chart"
	// From git, the chart a directory of the repository.
	root := testgit.NewRoot(t)
	repo := root.NewRepo("charts")
	repo.WriteFiles(testfiles.Read(t, sharedChart(t, "hello-world"), "hello-world"))
	repo.Tag("v1", repo.Commit("hello-world"))
	url := root.ServeHTTP(testgit.HTTPOptions{Host: strings.TrimSpace(os.Getenv("E2E_FIXTURE_HOST"))}).RepoURL("charts")
	source := fmt.Sprintf("type: git\n        git:\n          repository: %s\n          directory: hello-world\n          ref: {tag: v1}", url)
	mustKubectl(t, "", "create", "namespace", ns)
	t.Cleanup(func() {
		_, _, _ = kubectl(t, "", "delete", "bd", name, "--ignore-not-found", "--timeout=2m")
		_, _, _ = kubectl(t, "", "delete", "namespace", ns, "--ignore-not-found", "--wait=false")
	})
	// nginx's place: rukpak.test/hello:v1 serves / on port 80.
	values := "image: {repository: rukpak.test/hello, tag: v1}\n"
	mustKubectl(t, helmBD(name, ns, "", values+"replicaCount: 1\n", source), "apply", "-f", "-")
	waitLong(t, "bd/"+name, "condition=Installed", 3*time.Minute)
	waitLong(t, "bd/"+name, "condition=Healthy", 3*time.Minute)
	deploy := "deployment/" + name + " -n " + ns

	mustKubectl(t, helmBD(name, ns, "", values+"replicaCount: 2\n", source), "apply", "-f", "-")
	eventually(t, 3*time.Minute, "two ready replicas", func() error {
		if r := jsonpath(t, deploy, "{.status.readyReplicas}"); r != "2" {
			return fmt.Errorf("readyReplicas %q", r)
		}
		return nil
	})
	if h := helmHistory(t, name); h != "1:superseded 2:deployed" {
		t.Fatalf("helm history %s: %s, want 1:superseded 2:deployed", name, h)
	}
	uid := jsonpath(t, deploy, "{.metadata.uid}")
	waitFor(t, "bd/"+name, "condition=Healthy", 2*time.Minute)

	// Drift: scaled to zero by hand, the chart's two replicas come back,
	// on the same Deployment (an upgrade in place, not a reinstall).
	mustKubectl(t, "", "scale", "deployment/"+name, "-n", ns, "--replicas=0")
	eventually(t, 3*time.Minute, "the drift corrected: two ready replicas again", func() error {
		if r := jsonpath(t, deploy, "{.spec.replicas}/{.status.readyReplicas}"); r != "2/2" {
			return fmt.Errorf("replicas/ready %q", r)
		}
		return nil
	})
	if got := jsonpath(t, deploy, "{.metadata.uid}"); got != uid {
		t.Errorf("the Deployment was replaced (uid %s, was %s)", got, uid)
	}
	if h := helmHistory(t, name); h != "1:superseded 2:deployed" {
		t.Errorf("drift correction wrote a revision: helm history %s", h)
	}

	mustKubectl(t, "", "delete", "bd", name, "--timeout=2m")
	if out := mustKubectl(t, "", "get", "deployments,services,serviceaccounts", "-n", ns, "-l", "app.kubernetes.io/instance="+name, "-o", "name"); out != "" {
		t.Errorf("left after the uninstall: %s", out)
	}
}
