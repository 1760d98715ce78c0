package webhook_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/webhook"
	"github.com/rukpak-dev/rukpak/webhook/certs"
)

// defaultSA is the --default-service-account TestAdmission's webhook runs
// with.
var defaultSA = webhook.ServiceAccount{Namespace: "tenants", Name: "default-installer"}

const bdWebhook = webhook.BundleDeploymentWebhookName

func imageBD(name string, sa *rukpakv1alpha1.ServiceAccountReference) *rukpakv1alpha1.BundleDeployment {
	return &rukpakv1alpha1.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: rukpakv1alpha1.BundleDeploymentSpec{
			ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
			ServiceAccount:       sa,
			Template: rukpakv1alpha1.BundleTemplate{Spec: rukpakv1alpha1.BundleSpec{
				ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
				Source:               rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: "registry.example.com/b:v1"}},
			}},
		}}
}

func mergePatch(c client.Client, name, body string) error {
	bd := &rukpakv1alpha1.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: name}}
	return c.Patch(context.Background(), bd, client.RawPatch(types.MergePatchType, []byte(body)))
}

func mustCreate(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		testenv.MustNotError(t, c.Create(context.Background(), obj), "creating %T %s", obj, obj.GetName())
	}
}

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: "Group", Name: name}
}

func impersonateRole(ns, name string, sas []string, groups ...string) []client.Object {
	subjects := make([]rbacv1.Subject, 0, len(groups))
	for _, g := range groups {
		subjects = append(subjects, group(g))
	}
	return []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: sas, Verbs: []string{"impersonate"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: subjects},
	}
}

func clusterRole(name string, rules []rbacv1.PolicyRule, groups ...string) []client.Object {
	subjects := make([]rbacv1.Subject, 0, len(groups))
	for _, g := range groups {
		subjects = append(subjects, group(g))
	}
	return []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}, Subjects: subjects},
	}
}

var editBDs = []rbacv1.PolicyRule{{APIGroups: []string{rukpakv1alpha1.GroupVersion.Group}, Resources: []string{"bundledeployments"},
	Verbs: []string{"get", "create", "update", "patch"}}}

// testDelegation (webhook with --default-service-account tenants/
// default-installer): mallory (group team-m) may edit every
// BundleDeployment and impersonate team-m/installer, whose rights stop at
// namespace team-m; she may impersonate neither kube-system/admin-installer
// nor the default. Any change of what another user's BundleDeployment
// installs or as whom is reviewed for her, and so are the steering
// annotations; her own BundleDeployment she may edit but not approve.
func testDelegation(t *testing.T, env *testenv.Env) {
	ctx := context.Background()
	c := env.Client
	mustCreate(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-m"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "team-m", Name: "installer"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "admin-installer"}})
	mustCreate(t, c, clusterRole("test-bd-editor", editBDs, "team-m", "team-d", "approvers")...)
	mustCreate(t, c, impersonateRole("team-m", "act-as-installer", []string{"installer"}, "team-m", "approvers")...)
	mustCreate(t, c, impersonateRole(defaultSA.Namespace, "dora-default", []string{defaultSA.Name}, "team-d")...)
	mustCreate(t, c, clusterRole("test-approve-m-own", []rbacv1.PolicyRule{{APIGroups: []string{rukpakv1alpha1.GroupVersion.Group},
		Resources: []string{"bundledeployments"}, ResourceNames: []string{"m-own"}, Verbs: []string{webhook.VerbApprove}}}, "approvers")...)

	victim := imageBD("victim", &rukpakv1alpha1.ServiceAccountReference{Namespace: "kube-system", Name: "admin-installer"})
	own := imageBD("m-own", &rukpakv1alpha1.ServiceAccountReference{Namespace: "team-m", Name: "installer"})
	own.Spec.UpgradeApproval = rukpakv1alpha1.UpgradeApprovalManual
	mustCreate(t, c, victim, own)

	mallory := impersonate(t, env, "mallory", "team-m")
	dora := impersonate(t, env, "dora", "team-d")
	ann := impersonate(t, env, "ann", "approvers")

	const asAdmin = `spec.serviceAccount: user "mallory" may not impersonate ServiceAccount kube-system/admin-installer, which the provisioner would install as`
	approve := func(user, bd string) string {
		return `metadata.annotations[core.rukpak.io/approved-bundle]: user "` + user + `" may not set it: approving takes approve on bundledeployments "` + bd + `"`
	}
	cases := []struct {
		name   string
		client client.Client
		bd     string
		patch  string
		want   string // the denial after "denied the request: "; "" when admitted
	}{
		// The reproducer: her content installed with another account's rights.
		{"template of another's BundleDeployment", mallory, "victim", `{"spec":{"template":{"spec":{"source":{"image":{"ref":"registry.example.com/mallory:v1"}}}}}}`, asAdmin},
		{"config of another's BundleDeployment", mallory, "victim", `{"spec":{"config":{"installNamespace":"kube-system"}}}`, asAdmin},
		{"class of another's BundleDeployment", mallory, "victim", `{"spec":{"provisionerClassName":"core-rukpak-io-helm"}}`, asAdmin},
		{"template metadata of another's BundleDeployment", mallory, "victim", `{"spec":{"template":{"metadata":{"labels":{"x":"y"}}}}}`, asAdmin},
		{"removing the ServiceAccount", mallory, "victim", `{"spec":{"serviceAccount":null}}`,
			`spec.serviceAccount: user "mallory" may not impersonate ServiceAccount tenants/default-installer, which the provisioner would install as (its --default-service-account: the BundleDeployment names no spec.serviceAccount)`},
		{"approving another's", mallory, "victim", `{"metadata":{"annotations":{"core.rukpak.io/approved-bundle":"victim-abcdef"}}}`,
			asAdmin + "; " + approve("mallory", "victim")},
		// Not reviewed: what or as whom stays the same.
		{"a label", mallory, "victim", `{"metadata":{"labels":{"note":"mallory"}}}`, ""},
		{"an annotation", mallory, "victim", `{"metadata":{"annotations":{"note":"mallory"}}}`, ""},
		{"a reconcile request", mallory, "victim", `{"metadata":{"annotations":{"core.rukpak.io/reconcile-requested-at":"1"}}}`, ""},
		{"pausing", mallory, "victim", `{"spec":{"paused":true}}`, ""},
		{"resuming", mallory, "victim", `{"spec":{"paused":false}}`, ""},
		// Her own: edits pass, the steering annotations take their verbs.
		{"template of her own", mallory, "m-own", `{"spec":{"template":{"spec":{"source":{"image":{"ref":"registry.example.com/b:v2"}}}}}}`, ""},
		{"template and approval in one write", mallory, "m-own", `{"metadata":{"annotations":{"core.rukpak.io/approved-bundle":"m-own-abcdef"}},"spec":{"template":{"spec":{"source":{"image":{"ref":"registry.example.com/b:v3"}}}}}}`,
			approve("mallory", "m-own")},
		{"leaving Manual", mallory, "m-own", `{"spec":{"upgradeApproval":"Automatic"}}`,
			`spec.upgradeApproval: user "mallory" may not set it: leaving Manual approves what waits: it takes approve on bundledeployments "m-own"`},
		{"skipping the CRD preflight", mallory, "m-own", `{"metadata":{"annotations":{"core.rukpak.io/skip-crd-upgrade-preflight":"true"}}}`,
			`metadata.annotations[core.rukpak.io/skip-crd-upgrade-preflight]: user "mallory" may not set it: skipping the CRD upgrade preflight takes skip-crd-upgrade-preflight on bundledeployments "m-own"`},
		{"moving to another shard", mallory, "m-own", `{"metadata":{"labels":{"core.rukpak.io/shard":"shard1"}}}`,
			`metadata.labels[core.rukpak.io/shard]: user "mallory" may not set it: moving it to another shard takes shard on bundledeployments "m-own"`},
		{"the creation intent", mallory, "m-own", `{"metadata":{"annotations":{"core.rukpak.io/creating-bundle":"m-own-abcdef"}}}`,
			`metadata.annotations[core.rukpak.io/creating-bundle]: user "mallory" may not set it: only the provisioner writes it (it takes impersonate on ServiceAccount rukpak-system/rukpak-provisioner)`},
		// An approver approves; approving is acting as the identity too.
		{"approval by an approver", ann, "m-own", `{"metadata":{"annotations":{"core.rukpak.io/approved-bundle":"m-own-abcdef"}}}`, ""},
		{"approval removed", mallory, "m-own", `{"metadata":{"annotations":{"core.rukpak.io/approved-bundle":null}}}`, ""},
		{"approval of another's by an approver", ann, "victim", `{"metadata":{"annotations":{"core.rukpak.io/approved-bundle":"victim-abcdef"}}}`,
			`spec.serviceAccount: user "ann" may not impersonate ServiceAccount kube-system/admin-installer, which the provisioner would install as; ` + approve("ann", "victim")},
		// Whoever may act as the default may fall back to it.
		{"removing the ServiceAccount, allowed the default", dora, "victim", `{"spec":{"serviceAccount":null}}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before rukpakv1alpha1.BundleDeployment
			testenv.MustNotError(t, c.Get(ctx, types.NamespacedName{Name: tc.bd}, &before), "getting %s", tc.bd)
			err := mergePatch(tc.client, tc.bd, tc.patch)
			checkAccessDenial(t, err, bdWebhook, "", tc.want)
			if tc.want == "" {
				return
			}
			var after rukpakv1alpha1.BundleDeployment
			testenv.MustNotError(t, c.Get(ctx, types.NamespacedName{Name: tc.bd}, &after), "getting %s", tc.bd)
			if after.ResourceVersion != before.ResourceVersion {
				t.Fatalf("%s changed despite the denial", tc.bd)
			}
		})
	}
	t.Run("creating one that installs as the default", func(t *testing.T) {
		checkAccessDenial(t, mallory.Create(ctx, imageBD("m-default", nil)), bdWebhook, "",
			`spec.serviceAccount: user "mallory" may not impersonate ServiceAccount tenants/default-installer, which the provisioner would install as (its --default-service-account: the BundleDeployment names no spec.serviceAccount)`)
		checkAccessDenial(t, dora.Create(ctx, imageBD("d-default", nil)), bdWebhook, "", "")
	})
	t.Run("creating one pre-approved", func(t *testing.T) {
		bd := imageBD("m-approved", &rukpakv1alpha1.ServiceAccountReference{Namespace: "team-m", Name: "installer"})
		bd.Annotations = map[string]string{rukpakv1alpha1.AnnotationApprovedBundle: "m-approved-abcdef"}
		checkAccessDenial(t, mallory.Create(ctx, bd), bdWebhook, "", approve("mallory", "m-approved"))
	})
}

// TestWebhookServiceAccount runs the webhook with only the rights the
// shipped manifests give its ServiceAccount (self-managed certificates:
// its Role names the certificate Secret alone), and without
// --default-service-account: a BundleDeployment naming no ServiceAccount
// installs as the provisioner, which takes impersonate on the provisioner's
// ServiceAccount, as the provisioner's own writes have.
func TestWebhookServiceAccount(t *testing.T) {
	env := startEnv(t, "localhost")
	ctx := context.Background()
	c := env.Client
	applyFile(t, c, filepath.Join(testenv.RepoRoot(), "manifests", "base", "webhook", "rbac.yaml"))
	applyFile(t, c, filepath.Join(testenv.RepoRoot(), "manifests", "base", "provisioner", "rbac.yaml"))
	// Other Secrets of the namespace, which the webhook must not read.
	mustCreate(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: bundleNamespace, Name: "sh.helm.release.v1.x.v1"}})

	asWebhook := rest.CopyConfig(env.Config)
	asWebhook.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:rukpak-system:rukpak-webhook",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:rukpak-system"}}
	runWebhookAs(t, env, asWebhook, webhook.Config{
		CertMode: webhook.CertModeSelf,
		Server:   webhook.ServerOptions{CertDir: t.TempDir()},
		Certs: certs.Options{
			Namespace:             bundleNamespace,
			DNSName:               "localhost",
			WebhookConfigurations: []string{webhook.DefaultConfigurationName},
			ControllerName:        "cert-rotator-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		},
	})

	t.Run("its Role reads only its certificate Secret", func(t *testing.T) {
		for _, attrs := range []authorizationv1.ResourceAttributes{
			{Namespace: bundleNamespace, Verb: "list", Resource: "secrets"},
			{Namespace: bundleNamespace, Verb: "watch", Resource: "secrets"},
			{Namespace: bundleNamespace, Verb: "get", Resource: "secrets", Name: "sh.helm.release.v1.x.v1"},
			{Namespace: bundleNamespace, Verb: "create", Resource: "secrets"},
		} {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: asWebhook.Impersonate.UserName, Groups: asWebhook.Impersonate.Groups, ResourceAttributes: &attrs}}
			testenv.MustNotError(t, c.Create(ctx, sar), "reviewing %+v", attrs)
			if sar.Status.Allowed {
				t.Errorf("the webhook's ServiceAccount may %s secrets %q", attrs.Verb, attrs.Name)
			}
		}
	})
	t.Run("it admits with those rights", func(t *testing.T) {
		mustCreate(t, c, imageBD("admitted", nil))
		checkAccessDenial(t, mergePatch(c, "admitted", `{"spec":{"template":{"spec":{"source":{"git":{"directory":"/x"}}}}}}`), bdWebhook, "", "invalid")
	})

	mustCreate(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-m"}})
	mustCreate(t, c, clusterRole("test-bd-editor", editBDs, "team-m")...)
	mustCreate(t, c, impersonateRole("team-m", "act-as-installer", []string{"installer"}, "team-m")...)
	mustCreate(t, c, imageBD("named", &rukpakv1alpha1.ServiceAccountReference{Namespace: "team-m", Name: "installer"}))
	mallory := impersonate(t, env, "mallory", "team-m")
	const asProvisioner = `spec.serviceAccount: user "mallory" may not impersonate ServiceAccount rukpak-system/rukpak-provisioner, which the provisioner would install as (its own: the BundleDeployment names no spec.serviceAccount and the provisioner has no --default-service-account)`

	t.Run("installing as the provisioner", func(t *testing.T) {
		checkAccessDenial(t, mallory.Create(ctx, imageBD("m-provisioner", nil)), bdWebhook, "", asProvisioner)
		checkAccessDenial(t, mergePatch(mallory, "named", `{"spec":{"serviceAccount":null}}`), bdWebhook, "", asProvisioner)
		checkAccessDenial(t, mergePatch(mallory, "admitted", `{"spec":{"template":{"spec":{"source":{"image":{"ref":"registry.example.com/m:v1"}}}}}}`), bdWebhook, "", asProvisioner)
		checkAccessDenial(t, mergePatch(mallory, "named", `{"spec":{"template":{"spec":{"source":{"image":{"ref":"registry.example.com/m:v1"}}}}}}`), bdWebhook, "", "")
	})
	t.Run("the provisioner's own writes", func(t *testing.T) {
		// As ensureFinalizer writes them: the finalizer and the creation
		// intent in one patch.
		provisioner := impersonate(t, env, "system:serviceaccount:rukpak-system:rukpak-provisioner", "system:serviceaccounts", "system:serviceaccounts:rukpak-system")
		for _, name := range []string{"admitted", "named"} {
			body := `{"metadata":{"finalizers":["core.rukpak.io/uninstall"],"annotations":{"core.rukpak.io/creating-bundle":"` + name + `-abcdef"}}}`
			checkAccessDenial(t, mergePatch(provisioner, name, body), bdWebhook, "", "")
		}
		checkAccessDenial(t, mergePatch(mallory, "named", `{"metadata":{"annotations":{"core.rukpak.io/creating-bundle":"named-other"}}}`), bdWebhook, "",
			`metadata.annotations[core.rukpak.io/creating-bundle]: user "mallory" may not set it: only the provisioner writes it (it takes impersonate on ServiceAccount rukpak-system/rukpak-provisioner)`)
	})
}

// applyFile creates every object of a multi-document YAML file.
func applyFile(t *testing.T, c client.Client, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	testenv.MustNotError(t, err, "reading %s", path)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatalf("decoding %s: %v", path, err)
		}
		if len(u.Object) > 0 {
			testenv.MustNotError(t, c.Create(context.Background(), u), "creating %s %s", u.GetKind(), u.GetName())
		}
	}
}
