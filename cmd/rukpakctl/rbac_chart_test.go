package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// The RBAC for a chart as render prints it with --set: crds/ cluster-wide,
// the manifest and the hooks in the release's namespace, and list and
// watch on Jobs, which Helm waits for as hooks. That the rules are enough
// for a chart is proven in envtest (provisioner's
// TestIntegrationHelmServiceAccount).
func TestRBACChart(t *testing.T) {
	chart := filepath.Join(testenv.RepoRoot(), "test/testdata/charts/hooks")
	got, err := rbac(t, chart, "--service-account", "tenant/installer", "--install-namespace", "tenant", "--set", "jobs=true", "--release-name", "hsa")
	if err != nil {
		t.Fatal(err)
	}
	want := crdClusterRBAC("rukpak-install-installer", "tenant", "installer") + `---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: rukpak-install-installer
  namespace: tenant
rules:
- apiGroups:
  - ""
  resources:
  - configmaps
  verbs:
  - create
  - delete
  - get
  - patch
- apiGroups:
  - batch
  resources:
  - jobs
  verbs:
  - create
  - delete
  - get
  - list
  - patch
  - watch
- apiGroups:
  - hooks.test.rukpak.io
  resources:
  - gadgets
  verbs:
  - create
  - delete
  - get
  - patch
` + roleBinding("rukpak-install-installer", "tenant", "tenant", "installer")
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}

// A chart whose templates name .Release.Namespace (most real charts do)
// gets its Role in --install-namespace, where the release goes, not in
// Helm's default namespace.
func TestRBACChartReleaseNamespace(t *testing.T) {
	chart := t.TempDir()
	for name, content := range map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: ns\nversion: 0.1.0\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: {{ .Release.Namespace }}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(chart, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(chart, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := rbac(t, chart, "--service-account", "tenant/installer", "--install-namespace", "tenant")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "kind: Role\nmetadata:\n  name: rukpak-install-installer\n  namespace: tenant\n") || strings.Contains(got, "namespace: default") {
		t.Fatalf("the Role is not in the release's namespace tenant:\n%s", got)
	}
}
