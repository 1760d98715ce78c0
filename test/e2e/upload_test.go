package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runRukpakctl runs rukpakctl (built from this checkout) against the
// suite's cluster and returns stdout, stderr and the error.
func runRukpakctl(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	bin, err := rukpakctl()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, append(args, "--kubeconfig", suite.kubeconfig)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	return stdout.String(), stderr.String(), err
}

// writeUploadBundle writes a plain bundle of a namespace and a ConfigMap
// whose data says version.
func writeUploadBundle(t *testing.T, ns, version string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "manifests"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"manifests/namespace.yaml": fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", ns),
		"manifests/settings.yaml":  fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: %s\ndata:\n  version: %s\n", ns, version),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var uploadedBundle = regexp.MustCompile(`successfully uploaded bundle content for "([^"]+)"`)

// TestRukpakctlRun: rukpakctl run installs a local directory through the
// upload source, rukpakctl content lists what was uploaded, running it
// again changes nothing, an upload as a ServiceAccount without create on
// bundles/upload is refused with a message naming the right, changed
// content pivots, and the replaced Bundle's upload is removed.
func TestRukpakctlRun(t *testing.T) {
	shared(t)
	if suite.local == nil {
		t.Skip("needs the local environment: elsewhere the content service is reached through a port-forward (--content-url)")
	}
	const name, ns = "upload-e2e", "upload-e2e"
	caFile := filepath.Join(t.TempDir(), "content-ca.pem")
	if err := os.WriteFile(caFile, contentCA(t), 0o644); err != nil {
		t.Fatal(err)
	}
	conn := []string{"--ca-file", caFile, "--content-url", "https://" + suite.local.Addresses.Content}
	t.Cleanup(func() {
		_, _, _ = kubectl(t, "", "delete", "bundledeployment", name, "--ignore-not-found", "--wait=true", "--timeout=2m")
		_, _, _ = kubectl(t, "", "-n", "rukpak-system", "delete", "serviceaccount", "upload-e2e-nobody", "--ignore-not-found")
	})

	v1 := writeUploadBundle(t, ns, "v1")
	out, errOut, err := runRukpakctl(t, append([]string{"run", name, v1}, conn...)...)
	if err != nil {
		t.Fatalf("rukpakctl run: %v\n%s%s", err, out, errOut)
	}
	if !strings.Contains(out, fmt.Sprintf("bundledeployment.core.rukpak.io %q applied\n", name)) {
		t.Fatalf("rukpakctl run printed %q, want RukPak's applied line", out)
	}
	m := uploadedBundle.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("rukpakctl run printed %q, want RukPak's uploaded line", out)
	}
	first := m[1]
	waitFor(t, "bundledeployment/"+name, "condition=Installed=True", 2*time.Minute)
	if got := jsonpath(t, "configmap settings -n "+ns, "{.data.version}"); got != "v1" {
		t.Fatalf("installed ConfigMap has version %q, want v1", got)
	}
	if got := jsonpath(t, "bundle "+first, "{.status.resolvedSource.upload.digest}"); !strings.HasPrefix(got, "sha256:") || got != jsonpath(t, "bundle "+first, "{.spec.source.upload.digest}") {
		t.Fatalf("resolvedSource pins %q, want the spec's digest", got)
	}

	// rukpakctl content lists what was uploaded.
	out, errOut, err = runRukpakctl(t, append([]string{"content", first}, conn...)...)
	if err != nil || !strings.Contains(out, "manifests/settings.yaml") || !strings.Contains(out, "manifests/namespace.yaml") {
		t.Fatalf("rukpakctl content %s: %v\n%s%s", first, err, out, errOut)
	}

	// The same directory again: nothing to do.
	out, errOut, err = runRukpakctl(t, append([]string{"run", name, v1}, conn...)...)
	if err != nil || !strings.Contains(out, fmt.Sprintf("bundle %q is already up-to-date", first)) {
		t.Fatalf("rukpakctl run again: %v\n%s%s", err, out, errOut)
	}

	// A ServiceAccount without create on bundles/upload is refused, with
	// the right named.
	mustKubectl(t, "", "-n", "rukpak-system", "create", "serviceaccount", "upload-e2e-nobody")
	v2 := writeUploadBundle(t, ns, "v2")
	out, errOut, err = runRukpakctl(t, append([]string{"run", name, v2, "--service-account", "rukpak-system/upload-e2e-nobody"}, conn...)...)
	if err == nil {
		t.Fatalf("an upload without the right succeeded:\n%s", out)
	}
	for _, want := range []string{"403 Forbidden", `user "system:serviceaccount:rukpak-system:upload-e2e-nobody" cannot create resource "bundles/upload"`, "bundle-uploader"} {
		if !strings.Contains(errOut, want) {
			t.Fatalf("refusal %q does not say %q", errOut, want)
		}
	}
	if got := jsonpath(t, "configmap settings -n "+ns, "{.data.version}"); got != "v1" {
		t.Fatalf("after a refused upload the ConfigMap has version %q, want v1", got)
	}
	firstUID := jsonpath(t, "bundle "+first, "{.metadata.uid}")

	// Changed content pivots, with the right.
	out, errOut, err = runRukpakctl(t, append([]string{"run", name, v2}, conn...)...)
	if err != nil {
		t.Fatalf("rukpakctl run v2: %v\n%s%s", err, out, errOut)
	}
	m = uploadedBundle.FindStringSubmatch(out)
	if m == nil || m[1] == first {
		t.Fatalf("rukpakctl run v2 printed %q, want a new Bundle uploaded", out)
	}
	eventually(t, 2*time.Minute, "the pivot to v2", func() error {
		if got := jsonpath(t, "configmap settings -n "+ns, "{.data.version}"); got != "v2" {
			return fmt.Errorf("ConfigMap version %q", got)
		}
		if got := jsonpath(t, "bundledeployment "+name, "{.status.activeBundle}"); got != m[1] {
			return fmt.Errorf("active bundle %q", got)
		}
		return nil
	})
	// The replaced Bundle is deleted, and its upload with it.
	eventually(t, 2*time.Minute, "the first Bundle's upload removed", func() error {
		if _, _, err := kubectl(t, "", "get", "bundle", first); err == nil {
			return fmt.Errorf("bundle %s still exists", first)
		}
		if _, err := os.Stat(filepath.Join(suite.local.StateDir, "bundles", "uploads", firstUID+".tgz")); err == nil {
			return fmt.Errorf("upload of %s still stored", first)
		}
		return nil
	})
}
