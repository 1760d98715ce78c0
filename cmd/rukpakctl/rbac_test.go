package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

func rbac(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := newRootCmd(&out)
	cmd.SetArgs(append([]string{"rbac"}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// crdClusterRBAC is what rbac prints first for a bundle with CRDs: the
// ClusterRole name to manage them and its binding to service account
// saNamespace/sa.
func crdClusterRBAC(name, saNamespace, sa string) string {
	return `---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: ` + name + `
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
  name: ` + name + `
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: ` + name + `
subjects:
- kind: ServiceAccount
  name: ` + sa + `
  namespace: ` + saNamespace + `
`
}

// roleBinding is what rbac prints last: the binding of Role name in
// namespace to service account saNamespace/sa.
func roleBinding(name, namespace, saNamespace, sa string) string {
	return `---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: ` + name + `
  namespace: ` + namespace + `
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: ` + name + `
subjects:
- kind: ServiceAccount
  name: ` + sa + `
  namespace: ` + saNamespace + `
`
}

// The RBAC for etcd in OwnNamespace mode: CRDs cluster-wide, everything
// else (and the rules its operator's Role grants) in the namespace. That
// it is enough is proven in envtest (provisioner's
// TestIntegrationServiceAccountRegistry).
func TestRBACRegistry(t *testing.T) {
	got, err := rbac(t, shared(t, "registry-v1/etcd-0.9.4"), "--service-account", "etcd/installer", "--install-namespace", "etcd", "--watch-namespaces", "etcd")
	if err != nil {
		t.Fatal(err)
	}
	want := crdClusterRBAC("rukpak-install-installer", "etcd", "installer") + `---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: rukpak-install-installer
  namespace: etcd
rules:
- apiGroups:
  - ""
  resources:
  - endpoints
  - events
  - persistentvolumeclaims
  - pods
  - services
  verbs:
  - '*'
- apiGroups:
  - ""
  resources:
  - secrets
  verbs:
  - get
- apiGroups:
  - ""
  resources:
  - serviceaccounts
  verbs:
  - create
  - delete
  - get
  - patch
- apiGroups:
  - apps
  resources:
  - deployments
  verbs:
  - '*'
- apiGroups:
  - etcd.database.coreos.com
  resources:
  - etcdbackups
  - etcdclusters
  - etcdrestores
  verbs:
  - '*'
- apiGroups:
  - rbac.authorization.k8s.io
  resources:
  - rolebindings
  - roles
  verbs:
  - create
  - delete
  - get
  - patch
` + roleBinding("rukpak-install-installer", "etcd", "etcd", "installer")
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestRBACErrors(t *testing.T) {
	dir := shared(t, "plain/combo-v0.0.2")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{dir}, "--service-account NAMESPACE/NAME is required"},
		{[]string{dir, "--service-account", "installer"}, `service account "installer": want NAMESPACE/NAME`},
		{[]string{dir, "--service-account", "t/i", "--watch-namespaces", "x"}, "--install-namespace and --watch-namespaces only apply to registry+v1 bundles"},
	} {
		if _, err := rbac(t, tc.args...); err == nil || err.Error() != tc.want {
			t.Errorf("rbac %v: %v, want %s", tc.args, err, tc.want)
		}
	}
}

// A plain bundle's objects without a namespace go to --install-namespace,
// as spec.config.installNamespace places them.
func TestRBACPlainInstallNamespace(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "manifests"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifests", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := rbac(t, dir, "--service-account", "team/deployer", "--install-namespace", "team", "--name", "team-install")
	if err != nil {
		t.Fatal(err)
	}
	want := `---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: team-install
  namespace: team
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
` + roleBinding("team-install", "team", "team", "deployer")
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
