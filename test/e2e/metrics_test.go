package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rukpak-dev/rukpak/internal/testmetrics"
)

// scrape returns the provisioner's metrics as Prometheus scrapes them
// (HTTPS, the token of a ServiceAccount bound to rukpak-metrics-reader):
// from the local process, or from every provisioner pod (only the leader
// has per-object series).
func scrape(t *testing.T) (string, error) {
	t.Helper()
	if suite.local != nil {
		return scrapeURL(t, "https://"+suite.local.Addresses.ProvisionerMetrics+"/metrics")
	}
	pods, _, err := kubectl(t, "", "get", "pods", "-n", "rukpak-system", "-l", "app.kubernetes.io/name=rukpak-core", "-o", "jsonpath={.items[*].metadata.name}")
	if err != nil {
		return "", fmt.Errorf("listing provisioner pods: %w", err)
	}
	var all strings.Builder
	for _, pod := range strings.Fields(pods) {
		out, err := scrapePod(t, pod)
		if err != nil {
			return "", err
		}
		all.WriteString(out)
	}
	return all.String(), nil
}

// scrapePod reads the metrics of a provisioner pod of rukpak-system with
// the suite's reader token.
func scrapePod(t *testing.T, pod string) (string, error) {
	t.Helper()
	var body string
	err := atPod(t, pod, func(url string) error {
		var err error
		body, err = scrapeURL(t, url)
		return err
	})
	return body, err
}

// atPod calls f with the metrics URL of a provisioner pod of rukpak-system.
// The API server's pod proxy cannot reach it: it drops the caller's token,
// which the metrics endpoint needs. On the real node the pod's address is
// routed from this host; elsewhere kubectl port-forward reaches it.
func atPod(t *testing.T, pod string, f func(url string) error) error {
	t.Helper()
	if suite.node != nil {
		ip, _, err := kubectl(t, "", "get", "pod", "-n", "rukpak-system", pod, "-o", "jsonpath={.status.podIP}")
		if err != nil {
			return fmt.Errorf("the address of pod %s: %w", pod, err)
		}
		if ip == "" {
			return fmt.Errorf("pod %s has no address", pod)
		}
		return f("https://" + net.JoinHostPort(ip, "8080") + "/metrics")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", "port-forward", "-n", "rukpak-system", "pod/"+pod, "--address=127.0.0.1", ":8080")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+suite.kubeconfig)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("kubectl port-forward %s: %w", pod, err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	// "Forwarding from 127.0.0.1:40123 -> 8080"
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Forwarding from "); ok {
			local, _, _ := strings.Cut(rest, " ")
			go func() { _, _ = io.Copy(io.Discard, out) }()
			return f("https://" + local + "/metrics")
		}
	}
	return fmt.Errorf("kubectl port-forward %s printed no local address: %s", pod, errb.String())
}

// scrapeURL GETs a metrics URL with the suite's reader token.
func scrapeURL(t *testing.T, url string) (string, error) {
	t.Helper()
	code, body, err := testmetrics.Scrape(context.Background(), url, metricsToken(t))
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("metrics endpoint %s: %d %s", url, code, body)
	}
	return body, nil
}

// unauthenticatedScrape is the status code of a scrape without a token:
// of the local process, or of the first provisioner pod.
func unauthenticatedScrape(t *testing.T) (int, error) {
	t.Helper()
	var code int
	get := func(url string) error {
		var err error
		code, _, err = testmetrics.Scrape(context.Background(), url, "")
		return err
	}
	if suite.local != nil {
		return code, get("https://" + suite.local.Addresses.ProvisionerMetrics + "/metrics")
	}
	pods, _, err := kubectl(t, "", "get", "pods", "-n", "rukpak-system", "-l", "app.kubernetes.io/name=rukpak-core", "-o", "jsonpath={.items[*].metadata.name}")
	if err != nil {
		return 0, fmt.Errorf("listing provisioner pods: %w", err)
	}
	if len(strings.Fields(pods)) == 0 {
		return 0, fmt.Errorf("no provisioner pods")
	}
	return code, atPod(t, strings.Fields(pods)[0], get)
}

var readerToken struct {
	sync.Mutex
	token string
}

// metricsToken is a token of the ServiceAccount rukpak-system/e2e-metrics,
// bound to the shipped ClusterRole rukpak-metrics-reader (made
// once per run).
func metricsToken(t *testing.T) string {
	t.Helper()
	readerToken.Lock()
	defer readerToken.Unlock()
	if readerToken.token == "" {
		mustKubectl(t, `apiVersion: v1
kind: ServiceAccount
metadata:
  name: e2e-metrics
  namespace: rukpak-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: e2e-metrics
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: rukpak-metrics-reader
subjects:
- kind: ServiceAccount
  name: e2e-metrics
  namespace: rukpak-system
`, "apply", "-f", "-")
		readerToken.token = strings.TrimSpace(mustKubectl(t, "", "create", "token", "e2e-metrics", "-n", "rukpak-system", "--duration=12h"))
	}
	return readerToken.token
}

// series returns the value of one series in exposition text (labels in
// name order, as the client library writes them), or "" if it is absent.
func series(text, s string) string {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), s+" "); ok {
			return v
		}
	}
	return ""
}

// waitMetrics scrapes until every series has its value ("" for absent).
func waitMetrics(t *testing.T, what string, want map[string]string) {
	t.Helper()
	eventually(t, time.Minute, what, func() error {
		text, err := scrape(t)
		if err != nil {
			return err
		}
		for s, v := range want {
			if got := series(text, s); got != v {
				return fmt.Errorf("%s = %q, want %q", s, got, v)
			}
		}
		return nil
	})
}

// The provisioner's metrics as an admin's Prometheus sees them, after an
// install, a drift correction, a pause that stops one, a failed upgrade and
// the deletion.
func TestMetrics(t *testing.T) {
	shared(t)
	const name = "metrics-e2e"
	bundleCM := func(cm, manifest string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: rukpak-system\nimmutable: true\ndata:\n  objects.yaml: |\n%s", cm, indent(manifest, 4))
	}
	obj := func(n string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: default\ndata:\n  k: v\n", n)
	}
	bd := func(cm string) string {
		return fmt.Sprintf(`apiVersion: core.rukpak.io/v1alpha1
kind: BundleDeployment
metadata:
  name: %s
spec:
  provisionerClassName: core-rukpak-io-plain
  template:
    spec:
      provisionerClassName: core-rukpak-io-plain
      source:
        type: configMaps
        configMaps:
        - configMap: {name: %s}
          path: manifests
`, name, cm)
	}
	t.Cleanup(func() {
		_, _, _ = kubectl(t, "", "delete", "bd", name, "--ignore-not-found", "--wait=false")
		_, _, _ = kubectl(t, "", "delete", "cm", "-n", "rukpak-system", "metrics-e2e-v1", "metrics-e2e-v2", "--ignore-not-found")
	})
	mustKubectl(t, bundleCM("metrics-e2e-v1", obj("metrics-e2e-a")+"---\n"+obj("metrics-e2e-b")), "apply", "-f", "-")
	mustKubectl(t, bd("metrics-e2e-v1"), "apply", "-f", "-")
	waitFor(t, "bd/"+name, "condition=Installed", 2*time.Minute)
	waitFor(t, "bd/"+name, "condition=Healthy", 2*time.Minute)

	// Only a token allowed to get /metrics reads them.
	if code, err := unauthenticatedScrape(t); err != nil || code != http.StatusUnauthorized {
		t.Errorf("a scrape without a token: %d %v, want 401", code, err)
	}

	cond := func(typ, status string) string {
		return fmt.Sprintf(`rukpak_condition{kind="BundleDeployment",name=%q,status=%q,type=%q}`, name, status, typ)
	}
	drift := fmt.Sprintf(`rukpak_drift_corrections_total{class="core-rukpak-io-plain",name=%q}`, name)
	objects := fmt.Sprintf(`rukpak_release_objects{name=%q}`, name)
	waitMetrics(t, "install metrics", map[string]string{
		cond("Installed", "True"): "1", cond("Installed", "False"): "0",
		cond("Healthy", "True"): "1",
		objects:                 "2",
		drift:                   "",
	})

	mustKubectl(t, "", "delete", "cm", "-n", "default", "metrics-e2e-a")
	eventually(t, time.Minute, "metrics-e2e-a restored", func() error {
		_, errOut, err := kubectl(t, "", "get", "cm", "-n", "default", "metrics-e2e-a")
		if err != nil {
			return fmt.Errorf("%w: %s", err, errOut)
		}
		return nil
	})
	waitMetrics(t, "the drift correction counted", map[string]string{drift: "1"})

	// Paused, the same deletion stays; a requested reconcile handled after
	// it shows the provisioner looked.
	mustKubectl(t, "", "patch", "bd", name, "--type=merge", "-p", `{"spec":{"paused":true}}`)
	waitFor(t, "bd/"+name, "condition=Paused", time.Minute)
	waitMetrics(t, "the pause shown", map[string]string{cond("Paused", "True"): "1"})
	mustKubectl(t, "", "delete", "cm", "-n", "default", "metrics-e2e-a")
	mustKubectl(t, "", "annotate", "bd", name, "--overwrite", "core.rukpak.io/reconcile-requested-at=paused-1")
	waitFor(t, "bd/"+name, "jsonpath={.status.lastHandledReconcileAt}=paused-1", time.Minute)
	if _, _, err := kubectl(t, "", "get", "cm", "-n", "default", "metrics-e2e-a"); err == nil {
		t.Errorf("metrics-e2e-a was restored while paused")
	}
	waitMetrics(t, "no drift correction while paused", map[string]string{drift: "1"})
	mustKubectl(t, "", "patch", "bd", name, "--type=merge", "-p", `{"spec":{"paused":false}}`)
	eventually(t, time.Minute, "metrics-e2e-a restored after resuming", func() error {
		_, errOut, err := kubectl(t, "", "get", "cm", "-n", "default", "metrics-e2e-a")
		if err != nil {
			return fmt.Errorf("%w: %s", err, errOut)
		}
		return nil
	})
	waitMetrics(t, "the resumed drift correction counted", map[string]string{drift: "2", cond("Paused", "True"): ""})

	// An upgrade to an object of a kind the cluster lacks fails.
	missing := "apiVersion: nothing.example.com/v1\nkind: Nothing\nmetadata:\n  name: nothing-1\n  namespace: default\n"
	mustKubectl(t, bundleCM("metrics-e2e-v2", missing), "apply", "-f", "-")
	mustKubectl(t, bd("metrics-e2e-v2"), "apply", "-f", "-")
	waitFor(t, "bd/"+name, "jsonpath={.status.conditions[?(@.type==\"Installed\")].reason}=UpgradeFailed", 2*time.Minute)
	waitMetrics(t, "the failure shown", map[string]string{
		cond("Installed", "True"): "0", cond("Installed", "False"): "1",
		objects: "2", // the installed revision is still the first
	})

	mustKubectl(t, "", "delete", "bd", name, "--timeout=2m")
	eventually(t, time.Minute, "the deleted bundle deployment's series gone", func() error {
		text, err := scrape(t)
		if err != nil {
			return err
		}
		if strings.Contains(text, fmt.Sprintf(`name=%q`, name)) {
			return fmt.Errorf("series of %s left", name)
		}
		return nil
	})
}
