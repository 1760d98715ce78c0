package provisioner_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// helmCLI runs the helm CLI (hack/testbin.sh helm, the version of go.mod)
// as an admin against the harness's API server, in the namespace of the
// release records, and returns its standard output.
func (h *harness) helmCLI(args ...string) string {
	h.t.Helper()
	dir := testenv.MustTestbin(h.t, "helm")
	helm := exec.Command(filepath.Join(dir, "helm"), append([]string{"--kubeconfig", h.adminKubeconfig(), "-n", namespace}, args...)...)
	// Nothing of the machine's own helm configuration.
	home := h.t.TempDir()
	helm.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	var stderr bytes.Buffer
	helm.Stderr = &stderr
	out, err := helm.Output()
	if err != nil {
		h.t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// adminKubeconfig writes a kubeconfig of a cluster admin of the harness's
// API server, for tools run as processes.
func (h *harness) adminKubeconfig() string {
	h.t.Helper()
	user, err := h.env.Env.AddUser(envtest.User{Name: "admin-tool", Groups: []string{"system:masters"}}, nil)
	testenv.MustNotError(h.t, err, "adding a user")
	kcfg, err := user.KubeConfig()
	testenv.MustNotError(h.t, err, "writing a kubeconfig")
	kubeconfig := filepath.Join(h.t.TempDir(), "kubeconfig")
	testenv.MustNotError(h.t, os.WriteFile(kubeconfig, kcfg, 0o600), "writing %s", kubeconfig)
	return kubeconfig
}

// helmCLICheck is what an admin reads of a release with helm itself.
func helmCLICheck(t *testing.T, h *harness, release string, want map[string]string) {
	t.Helper()
	for args, expected := range want {
		if got := strings.TrimSpace(h.helmCLI(append(strings.Fields(args), release)...)); got != expected {
			t.Errorf("helm %s %s:\n%s\nwant:\n%s", args, release, got, expected)
		}
	}
}

// helmCLIHistory is `helm history release` as "revision:status ...".
func helmCLIHistory(t *testing.T, h *harness, release string) string {
	t.Helper()
	var revs []struct {
		Revision int    `json:"revision"`
		Status   string `json:"status"`
	}
	if err := json.Unmarshal([]byte(h.helmCLI("history", release, "-o", "json")), &revs); err != nil {
		t.Fatalf("helm history -o json: %v", err)
	}
	out := make([]string, len(revs))
	for i, r := range revs {
		out[i] = fmt.Sprintf("%d:%s", r.Revision, r.Status)
	}
	return strings.Join(out, " ")
}

// helmCLIList is `helm list` as "name:revision:status ...".
func helmCLIList(t *testing.T, h *harness) string {
	t.Helper()
	var rels []struct {
		Name     string `json:"name"`
		Revision string `json:"revision"`
		Status   string `json:"status"`
	}
	if err := json.Unmarshal([]byte(h.helmCLI("list", "-o", "json")), &rels); err != nil {
		t.Fatalf("helm list -o json: %v", err)
	}
	out := make([]string, len(rels))
	for i, r := range rels {
		out[i] = r.Name + ":" + r.Revision + ":" + r.Status
	}
	return strings.Join(out, " ")
}
