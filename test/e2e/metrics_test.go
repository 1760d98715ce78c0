package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// scrape returns the provisioner's metrics as Prometheus scrapes them: from
// the local process, or through the API server's pod proxy from every
// provisioner pod (only the leader has per-object series).
func scrape(t *testing.T) (string, error) {
	t.Helper()
	if suite.local != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+suite.local.Addresses.ProvisionerMetrics+"/metrics", nil)
		if err != nil {
			return "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("metrics endpoint: %s", resp.Status)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		return string(b), err
	}
	pods, _, err := kubectl(t, "", "get", "pods", "-n", "rukpak-system", "-l", "app.kubernetes.io/name=rukpak-core", "-o", "jsonpath={.items[*].metadata.name}")
	if err != nil {
		return "", fmt.Errorf("listing provisioner pods: %w", err)
	}
	var all strings.Builder
	for _, pod := range strings.Fields(pods) {
		out, errOut, err := kubectl(t, "", "get", "--raw", "/api/v1/namespaces/rukpak-system/pods/"+pod+":8080/proxy/metrics")
		if err != nil {
			return "", fmt.Errorf("scraping %s: %w: %s", pod, err, errOut)
		}
		all.WriteString(out)
	}
	return all.String(), nil
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
