package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// rukpakctl is rukpakctl built from this checkout: make test-e2e's, with
// the binaries the suite runs (RUKPAK_BIN_DIR), else built once for the
// tests that run it (TestMain starts that build before the cluster).
var rukpakctl = sync.OnceValues(func() (string, error) {
	if dir := os.Getenv("RUKPAK_BIN_DIR"); dir != "" {
		if bin := filepath.Join(dir, "rukpakctl"); fileExists(bin) {
			return bin, nil
		}
	}
	bin := filepath.Join(suite.buildDir, "rukpakctl")
	build := exec.Command("go", "build", "-o", bin, "./cmd/rukpakctl")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building rukpakctl: %w\n%s", err, out)
	}
	return bin, nil
})

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// rukpakctlRBAC runs `rukpakctl rbac` (built from this checkout) and
// returns what it prints.
func rukpakctlRBAC(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := rukpakctl()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, append([]string{"rbac"}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("rukpakctl rbac %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// TestServiceAccountInstalls installs the plain example (combo, which
// creates its own namespace) and a registry+v1 operator in AllNamespaces
// mode, each as a ServiceAccount granted exactly what `rukpakctl rbac`
// prints for it, and uninstalls them as it; on the real node their pods
// run and become Healthy. The two run side by side.
func TestServiceAccountInstalls(t *testing.T) {
	shared(t)
	f := newFixtures(t)
	root := testenv.RepoRoot()
	for _, tc := range []struct {
		name, class, ref, dir, config string
		rbacArgs                      []string
		// bundle names it for takeTurns (TestStory installs both too),
		// crd the CRD the turn ends with the deletion of.
		bundle, crd string
		// created is a namespace the bundle creates: the uninstall is
		// over once it is gone (TestStory installs combo too).
		created string
	}{{
		name: "combo", class: "core-rukpak-io-plain", ref: f.comboV2, bundle: "combo", crd: "combinations.combo.io",
		dir: "test/testdata/bundles/plain/combo-v0.0.2", created: "combo",
	}, {
		name: "ready", class: "core-rukpak-io-registry", ref: f.operator, bundle: "ready-operator", crd: "widgets.ready.rukpak.test",
		dir:      "test/testdata/bundles/registry-v1/ready-operator-1.0.0",
		config:   `{installNamespace: sa-ready}`,
		rbacArgs: []string{"--install-namespace", "sa-ready"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			takeTurns(t, tc.bundle)
			ns := "sa-" + tc.name
			bd := "sa-" + tc.name
			mustKubectl(t, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: installer, namespace: %s}\n", ns, ns), "apply", "-f", "-")
			rbac := rukpakctlRBAC(t, append([]string{filepath.Join(root, tc.dir), "--service-account", ns + "/installer", "--name", bd}, tc.rbacArgs...)...)
			mustKubectl(t, rbac, "apply", "-f", "-")
			t.Cleanup(func() {
				_, _, _ = kubectl(t, rbac, "delete", "--ignore-not-found", "-f", "-")
				_, _, _ = kubectl(t, "", "delete", "namespace", ns, "--ignore-not-found", "--wait=false")
			})
			config := ""
			if tc.config != "" {
				config = "\n  config: " + tc.config
			}
			mustKubectl(t, fmt.Sprintf(`apiVersion: core.rukpak.io/v1alpha1
kind: BundleDeployment
metadata:
  name: %s
spec:
  provisionerClassName: %s
  serviceAccount: {name: installer, namespace: %s}%s
  template:
    spec:
      source:
        %s
      provisionerClassName: %s
`, bd, tc.class, ns, config, f.imageSource(tc.ref), tc.class), "apply", "-f", "-")
			waitFor(t, "bd/"+bd, "condition=Installed", 2*time.Minute)
			if suite.realPods {
				waitFor(t, "bd/"+bd, "condition=Healthy", 3*time.Minute)
			}
			mustKubectl(t, "", "delete", "bd/"+bd, "--timeout=2m")
			if tc.created != "" {
				waitFor(t, "namespace/"+tc.created, "delete", 2*time.Minute)
			}
			waitFor(t, "crd/"+tc.crd, "delete", 2*time.Minute)
			if got := jsonpath(t, "deployments -A -l core.rukpak.io/owner-name="+bd, "{.items[*].metadata.name}"); got != "" {
				t.Errorf("deployments left after the uninstall: %s", got)
			}
		})
	}
}
