package provisioner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/provisioner"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/identity"
	"github.com/rukpak-dev/rukpak/provisioner/plain"
	"github.com/rukpak-dev/rukpak/provisioner/registry"
)

const identityBundle = `apiVersion: v1
kind: ConfigMap
metadata: {name: id-a, namespace: tenant}
data: {value: "%s"}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: op, namespace: tenant}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: op, namespace: tenant}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: op, namespace: tenant}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: op}
subjects: [{kind: ServiceAccount, name: op, namespace: tenant}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: id-op-nodes}
rules:
- {apiGroups: [""], resources: [nodes], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: id-op-nodes}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: id-op-nodes}
subjects: [{kind: ServiceAccount, name: op, namespace: tenant}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: id-c, namespace: tenant, labels: {delete-as-installer: "true"}}
`

// Dropped by the upgrade.
const identityBundleV1Only = `---
apiVersion: v1
kind: ConfigMap
metadata: {name: id-b, namespace: tenant, labels: {delete-as-installer: "true"}}
`

// asInstaller are admission policies that refuse writes to ConfigMaps in
// namespace tenant, and deletes of those labelled delete-as-installer,
// by anyone but the installer ServiceAccount: an install, upgrade, drift
// correction or uninstall that did not impersonate it fails.
const asInstaller = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: id-writes-as-installer}
spec:
  failurePolicy: Fail
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: tenant}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], resources: [configmaps], operations: [CREATE, UPDATE]}
  validations:
  - expression: request.userInfo.username == "system:serviceaccount:tenant:installer"
    messageExpression: '"written by " + request.userInfo.username'
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: id-writes-as-installer}
spec: {policyName: id-writes-as-installer, validationActions: [Deny]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: id-deletes-as-installer}
spec:
  failurePolicy: Fail
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: tenant}}
    objectSelector: {matchLabels: {delete-as-installer: "true"}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], resources: [configmaps], operations: [DELETE]}
  validations:
  - expression: request.userInfo.username == "system:serviceaccount:tenant:installer"
    messageExpression: '"deleted by " + request.userInfo.username'
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: id-deletes-as-installer}
spec: {policyName: id-deletes-as-installer, validationActions: [Deny]}
`

// A ServiceAccount with part of the permissions a bundle needs gets exactly
// the missing rules and nothing applied; granted exactly what rukpakctl
// rbac prints (identity.RBAC), the bundle installs, upgrades, is corrected
// and uninstalls, every object write and delete made as the ServiceAccount.
// The provisioner requires an identity: a BundleDeployment without one is
// refused, then installs as the default once one is set.
func TestIntegrationServiceAccount(t *testing.T) {
	t.Parallel()
	h := newHarnessWith(t, func(o *provisioner.Options) { o.RequireServiceAccount = true })
	ctx := context.Background()
	create := func(docs string) []client.Object { return h.createDocs(docs) }
	h.tenantInstaller()
	partial := create(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: partial, namespace: tenant}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get, create, patch, delete]}
- {apiGroups: [""], resources: [serviceaccounts], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: partial, namespace: tenant}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: partial}
subjects: [{kind: ServiceAccount, name: installer, namespace: tenant}]`)

	t.Run("required", func(t *testing.T) {
		if err := h.c.Create(ctx, newBD("id-none", h.pushBundle("id-none", map[string]string{"manifests/cm.yaml": configMap("id-none", "v1")}))); err != nil {
			t.Fatal(err)
		}
		h.waitBD("id-none", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonServiceAccountRequired, identity.ErrRequired)
		if _, err := h.getCM("id-none"); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap of a refused BundleDeployment: %v, want not found", err)
		}
	})

	v1 := map[string]string{"manifests/objects.yaml": fmt.Sprintf(identityBundle, "v1") + identityBundleV1Only}
	bd := newBD("id", h.pushBundle("id-v1", v1))
	bd.Spec.ServiceAccount = &rukpakv1alpha1.ServiceAccountReference{Namespace: "tenant", Name: "installer"}
	if err := h.c.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}

	t.Run("missing rules listed, nothing applied", func(t *testing.T) {
		bd := h.waitBD("id", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInsufficientPermissions, "")
		want := fmt.Sprintf(`Service account tenant/installer may not install bundle %q, so nothing was applied. Grant it these rules (checked again every 30s, or at once with the core.rukpak.io/reconcile-requested-at annotation):
cluster-wide (ClusterRole):
- {apiGroups: ["rbac.authorization.k8s.io"], resources: ["clusterrolebindings", "clusterroles"], verbs: ["create", "delete", "get", "patch"]}
- {apiGroups: [""], resources: ["nodes"], verbs: ["get"]}  # ClusterRole id-op-nodes grants it (or: escalate on it); ClusterRoleBinding id-op-nodes binds ClusterRole id-op-nodes, which grants it (or: bind on it)
in namespace "tenant" (Role):
- {apiGroups: [""], resources: ["serviceaccounts"], verbs: ["create", "delete", "patch"]}
- {apiGroups: ["rbac.authorization.k8s.io"], resources: ["rolebindings", "roles"], verbs: ["create", "delete", "get", "patch"]}
- {apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch"]}  # Role tenant/op grants it (or: escalate on it); RoleBinding tenant/op binds Role op, which grants it (or: bind on it)`,
			bd.Status.GeneratedBundles[0].Name)
		if got := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled).Message; got != want {
			t.Errorf("Installed message:\n%s\nwant\n%s", got, want)
		}
		// The events list them by namespace, related to it.
		_, rules, _ := strings.Cut(want, ":\ncluster-wide")
		cluster, tenant, _ := strings.Cut("cluster-wide"+rules, "\nin namespace")
		wantEvents := []string{
			"-: Service account tenant/installer lacks:\n" + cluster,
			"Namespace tenant: Service account tenant/installer lacks:\nin namespace" + tenant,
		}
		eventually(t, "events listing the missing rules", func() error {
			list := &eventsv1.EventList{}
			if err := h.c.List(ctx, list); err != nil {
				return err
			}
			var got []string
			for _, e := range list.Items {
				if e.Regarding.Name == "id" && e.Reason == rukpakv1alpha1.ReasonInsufficientPermissions {
					related := "-"
					if e.Related != nil {
						related = e.Related.Kind + " " + e.Related.Name
					}
					got = append(got, related+": "+e.Note)
				}
			}
			sort.Strings(got)
			if strings.Join(got, "\n\n") != strings.Join(wantEvents, "\n\n") {
				return fmt.Errorf("events:\n%s\nwant\n%s", strings.Join(got, "\n\n"), strings.Join(wantEvents, "\n\n"))
			}
			return nil
		})
		for _, name := range []string{"id-a", "id-b", "id-c"} {
			cm := &corev1.ConfigMap{}
			if err := h.c.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: name}, cm); !apierrors.IsNotFound(err) {
				t.Errorf("ConfigMap %s: %v, want not found", name, err)
			}
		}
		secrets := &corev1.SecretList{}
		if err := h.c.List(ctx, secrets, client.InNamespace(namespace), client.MatchingLabels{"name": "id", "owner": "helm"}); err != nil || len(secrets.Items) != 0 {
			t.Errorf("release records: %d, %v; want none", len(secrets.Items), err)
		}
	})

	objects := func(files map[string]string) []*unstructured.Unstructured {
		t.Helper()
		var objs []*unstructured.Unstructured
		for _, d := range strings.Split(files["manifests/objects.yaml"], "\n---\n") {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
				t.Fatal(err)
			}
			objs = append(objs, u)
		}
		return objs
	}
	t.Run("granted what rukpakctl rbac prints, it installs", func(t *testing.T) {
		for _, o := range partial {
			if err := h.c.Delete(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		rbac, err := identity.RBAC(objects(v1), identity.ServiceAccount{Namespace: "tenant", Name: "installer"}, "installer")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range rbac {
			if err := h.c.Create(ctx, o); err != nil {
				t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
			}
		}
		cr := rbac[0].(*rbacv1.ClusterRole)
		role := rbac[2].(*rbacv1.Role)
		wantCluster := `[{"verbs":["get"],"apiGroups":[""],"resources":["nodes"]},{"verbs":["create","delete","get","patch"],"apiGroups":["rbac.authorization.k8s.io"],"resources":["clusterrolebindings","clusterroles"]}]`
		wantRole := `[{"verbs":["create","delete","get","list","patch","watch"],"apiGroups":[""],"resources":["configmaps"]},{"verbs":["create","delete","get","patch"],"apiGroups":[""],"resources":["serviceaccounts"]},{"verbs":["create","delete","get","patch"],"apiGroups":["rbac.authorization.k8s.io"],"resources":["rolebindings","roles"]}]`
		if got := mustJSON(t, cr.Rules); got != wantCluster {
			t.Errorf("ClusterRole rules %s, want %s", got, wantCluster)
		}
		if got := mustJSON(t, role.Rules); got != wantRole || role.Namespace != "tenant" {
			t.Errorf("Role %s rules %s, want tenant and %s", role.Namespace, got, wantRole)
		}
		h.updateBD("id", func(bd *rukpakv1alpha1.BundleDeployment) {
			metav1.SetMetaDataAnnotation(&bd.ObjectMeta, rukpakv1alpha1.AnnotationReconcileRequestedAt, "granted")
		})
		h.waitBD("id", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
		for _, name := range []string{"id-a", "id-b", "id-c"} {
			cm := &corev1.ConfigMap{}
			if err := h.c.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: name}, cm); err != nil {
				t.Errorf("ConfigMap %s: %v", name, err)
			}
		}
		crb := &rbacv1.ClusterRoleBinding{}
		if err := h.c.Get(ctx, client.ObjectKey{Name: "id-op-nodes"}, crb); err != nil {
			t.Errorf("ClusterRoleBinding id-op-nodes: %v", err)
		}
		secrets := &corev1.SecretList{}
		if err := h.c.List(ctx, secrets, client.InNamespace(namespace), client.MatchingLabels{"name": "id", "owner": "helm", "status": "deployed"}); err != nil || len(secrets.Items) != 1 {
			t.Errorf("deployed release records: %d, %v; want 1 (written by the provisioner: the ServiceAccount may not)", len(secrets.Items), err)
		}
	})

	t.Run("upgrade", func(t *testing.T) {
		src := h.pushBundle("id-v2", map[string]string{"manifests/objects.yaml": fmt.Sprintf(identityBundle, "v2")})
		h.updateBD("id", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = src })
		eventually(t, "id-a at v2 and id-b deleted", func() error {
			cm, err := getTenantCM(h, "id-a")
			if err != nil || cm.Data["value"] != "v2" {
				return fmt.Errorf("id-a: %v %w", cm.Data, err)
			}
			if _, err := getTenantCM(h, "id-b"); !apierrors.IsNotFound(err) {
				return fmt.Errorf("id-b: %w", err)
			}
			return nil
		})
		h.waitBD("id", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	})

	t.Run("drift corrected", func(t *testing.T) {
		cm, err := getTenantCM(h, "id-a")
		if err != nil {
			t.Fatal(err)
		}
		if err := h.c.Delete(ctx, cm); err != nil {
			t.Fatal(err)
		}
		eventually(t, "id-a restored", func() error {
			restored, err := getTenantCM(h, "id-a")
			if err == nil && restored.UID == cm.UID {
				return fmt.Errorf("not deleted yet")
			}
			return err
		})
	})

	t.Run("uninstall", func(t *testing.T) {
		if err := h.c.Delete(ctx, h.bd("id")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "bundle deployment id gone", func() error {
			err := h.c.Get(ctx, client.ObjectKey{Name: "id"}, &rukpakv1alpha1.BundleDeployment{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there: %w", err)
		})
		for _, o := range []client.Object{
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "id-a"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "id-c"}},
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "op"}},
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "op"}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "op"}},
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "id-op-nodes"}},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "id-op-nodes"}},
		} {
			eventually(t, fmt.Sprintf("%T %s deleted", o, o.GetName()), func() error {
				err := h.c.Get(ctx, client.ObjectKeyFromObject(o), o)
				if apierrors.IsNotFound(err) || (err == nil && !o.GetDeletionTimestamp().IsZero()) {
					return nil
				}
				return fmt.Errorf("still there: %w", err)
			})
		}
	})

	t.Run("default service account", func(t *testing.T) {
		h.kill()
		h.configure = func(o *provisioner.Options) {
			o.RequireServiceAccount = true
			o.DefaultServiceAccount = &identity.ServiceAccount{Namespace: "tenant", Name: "installer"}
		}
		h.start()
		// id-none's ConfigMap goes to namespace default, where the
		// installer may do nothing.
		h.waitBD("id-none", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInsufficientPermissions, `in namespace "default" (Role):
- {apiGroups: [""], resources: ["configmaps"], verbs: ["create", "delete", "get", "patch"]}`)
	})
}

func getTenantCM(h *harness, name string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	err := h.c.Get(context.Background(), client.ObjectKey{Namespace: "tenant", Name: name}, cm)
	return cm, err
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A real registry+v1 bundle (etcd, OwnNamespace) installs and uninstalls
// as a ServiceAccount granted exactly what rukpakctl rbac prints for it
// (identity.RBAC of the objects render prints).
func TestIntegrationServiceAccountRegistry(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	const ns = "etcd-sa"
	dir := filepath.Join(testenv.RepoRoot(), "test/testdata/bundles/registry-v1/etcd-0.9.4")
	converted, err := registry.Convert(os.DirFS(dir), registry.Options{InstallNamespace: ns, WatchNamespaces: []string{ns}})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := plain.Objects(converted)
	if err != nil {
		t.Fatal(err)
	}
	sa := identity.ServiceAccount{Namespace: ns, Name: "installer"}
	rbac, err := identity.RBAC(objs, sa, "etcd-installer")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range append([]client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "installer"}},
	}, rbac...) {
		if err := h.c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	var kinds []string
	for _, o := range rbac {
		kinds = append(kinds, fmt.Sprintf("%T %s/%s", o, o.GetNamespace(), o.GetName()))
	}
	if want := "*v1.ClusterRole /etcd-installer, *v1.ClusterRoleBinding /etcd-installer, *v1.Role etcd-sa/etcd-installer, *v1.RoleBinding etcd-sa/etcd-installer"; strings.Join(kinds, ", ") != want {
		t.Errorf("rbac objects: %s, want %s", strings.Join(kinds, ", "), want)
	}
	if got, want := mustJSON(t, rbac[0].(*rbacv1.ClusterRole).Rules), `[{"verbs":["create","delete","get","patch"],"apiGroups":["apiextensions.k8s.io"],"resources":["customresourcedefinitions"]}]`; got != want {
		t.Errorf("ClusterRole rules %s, want %s", got, want)
	}

	h.reg.MustPush(t, h.reg.Ref("etcd:v0.9.4"), testregistry.Image(t, testregistry.LayerFromDir(t, dir, "")))
	bd := newBD("etcd-sa", rukpakv1alpha1.BundleSource{
		Type:  rukpakv1alpha1.SourceTypeImage,
		Image: &rukpakv1alpha1.ImageSource{Ref: h.reg.Ref("etcd:v0.9.4"), CertificateData: string(h.reg.CAPEM)},
	})
	bd.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	bd.Spec.Template.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	bd.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(`{"installNamespace":"` + ns + `","watchNamespaces":["` + ns + `"]}`)}
	bd.Spec.ServiceAccount = &rukpakv1alpha1.ServiceAccountReference{Namespace: ns, Name: "installer"}
	if err := h.c.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}
	h.waitBD(bd.Name, rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "etcd-operator"}, &appsv1.Deployment{}); err != nil {
		t.Fatalf("operator deployment: %v", err)
	}
	if err := h.c.Delete(ctx, bd); err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "etcdclusters.etcd.database.coreos.com"}}
	eventually(t, "the CRDs to be uninstalled", func() error {
		err := h.c.Get(ctx, client.ObjectKeyFromObject(crd), crd)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("CRD still there: %w", err)
	})
}

// createDocs creates every object of the YAML documents docs.
func (h *harness) createDocs(docs string) []client.Object {
	h.t.Helper()
	var objs []client.Object
	for _, d := range strings.Split(docs, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
			h.t.Fatal(err)
		}
		if err := h.c.Create(context.Background(), u); err != nil {
			h.t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		objs = append(objs, u)
	}
	return objs
}

// tenantInstaller creates namespace tenant, its ServiceAccount installer,
// and the asInstaller admission policies, and waits until they refuse
// writes by anyone else.
func (h *harness) tenantInstaller() {
	h.t.Helper()
	h.createDocs(`apiVersion: v1
kind: Namespace
metadata: {name: tenant}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: installer, namespace: tenant}`)
	h.createDocs(asInstaller)
	eventually(h.t, "admission policies enforced", func() error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "tenant"}}
		err := h.c.Create(context.Background(), cm, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "written by") {
			return fmt.Errorf("dry-run create as admin: %w", err)
		}
		return nil
	})
}

// An uninstall goes as the identity the release was installed with
// (status.installedAs), not as whatever the spec says at deletion: the
// BundleDeployment's last editor removes spec.serviceAccount while it is
// paused (nothing is reconciled), its ServiceAccount is deleted, then the
// BundleDeployment: the objects are deleted as tenant/installer (the
// admission policies refuse their deletion by anyone else, the provisioner
// included), not with the provisioner's cluster-admin rights.
func TestIntegrationServiceAccountUninstallAsInstalled(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.tenantInstaller()
	h.createDocs(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: cms, namespace: tenant}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get, list, watch, create, patch, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: cms, namespace: tenant}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cms}
subjects: [{kind: ServiceAccount, name: installer, namespace: tenant}]`)
	bd := newBD("ui", h.pushBundle("ui-v1", map[string]string{"manifests/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: ui, namespace: tenant, labels: {delete-as-installer: "true"}}
`}))
	bd.Spec.ServiceAccount = &rukpakv1alpha1.ServiceAccountReference{Namespace: "tenant", Name: "installer"}
	if err := h.c.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}
	got := h.waitBD("ui", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	if rec := got.Status.InstalledAs; rec == nil || rec.ServiceAccount == nil || *rec.ServiceAccount != *bd.Spec.ServiceAccount {
		t.Fatalf("status.installedAs = %+v, want tenant/installer", rec)
	}
	if _, err := getTenantCM(h, "ui"); err != nil {
		t.Fatal(err)
	}

	h.updateBD("ui", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Paused = true })
	h.waitBD("ui", rukpakv1alpha1.TypePaused, metav1.ConditionTrue, rukpakv1alpha1.ReasonPaused, "")
	h.updateBD("ui", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.ServiceAccount = nil })
	if err := h.c.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "installer"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(ctx, h.bd("ui")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bundle deployment ui uninstalled", func() error {
		got := &rukpakv1alpha1.BundleDeployment{}
		if err := h.c.Get(ctx, client.ObjectKey{Name: "ui"}, got); err == nil {
			return fmt.Errorf("still there: %v", got.Status.Conditions)
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		cm, err := getTenantCM(h, "ui")
		if apierrors.IsNotFound(err) || (err == nil && !cm.DeletionTimestamp.IsZero()) {
			return nil
		}
		return fmt.Errorf("ConfigMap ui still there: %w", err)
	})
}
