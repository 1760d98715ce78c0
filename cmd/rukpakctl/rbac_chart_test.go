package main

import (
	"path/filepath"
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
	want := `---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: rukpak-install-installer
rules:
- apiGroups:
  - apiextensions.k8s.io
  resources:
  - customresourcedefinitions
  verbs:
  - create
  - delete
  - get
  - patch
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: rukpak-install-installer
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: rukpak-install-installer
subjects:
- kind: ServiceAccount
  name: installer
  namespace: tenant
---
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
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: rukpak-install-installer
  namespace: tenant
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: rukpak-install-installer
subjects:
- kind: ServiceAccount
  name: installer
  namespace: tenant
`
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}
