package webhook_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/webhook"
)

// impersonate returns a client acting as user in groups, through the real
// API server's authentication and RBAC.
func impersonate(t *testing.T, env *testenv.Env, user string, groups ...string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := client.New(cfg, client.Options{Scheme: env.Env.Scheme})
	testenv.MustNotError(t, err, "creating client for %s", user)
	return c
}

// testAccess: a Bundle or BundleDeployment may name only Secrets and
// ConfigMaps its creator may get. alice (group team-a) may read team-a's
// Secret and ConfigMap; bob (group team-b) may create Bundles and
// BundleDeployments but read nothing in the provisioners' namespace.
func testAccess(t *testing.T, env *testenv.Env) {
	ctx := context.Background()
	c := env.Client
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: bundleNamespace, Name: "team-a-creds"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: bundleNamespace, Name: "team-b-creds"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: bundleNamespace, Name: "team-a-content"}, Immutable: ptr.To(true)},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: bundleNamespace, Name: "team-a-mutable"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-bundle-author"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{rukpakv1alpha1.GroupVersion.Group}, Resources: []string{"bundles", "bundledeployments"},
			Verbs: []string{"get", "create", "update", "patch"},
		}}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "test-bundle-authors"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-bundle-author"},
			Subjects: []rbacv1.Subject{
				{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "team-a"},
				{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "team-b"},
			},
		},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: bundleNamespace, Name: "team-a-sources"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"team-a-creds"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"team-a-content", "team-a-mutable"}, Verbs: []string{"get"}},
		}},
		// Their BundleDeployments name no ServiceAccount: they install as
		// the default, which both teams may impersonate.
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: defaultSA.Namespace, Name: "act-as-default"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{defaultSA.Name}, Verbs: []string{"impersonate"}},
		}},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: defaultSA.Namespace, Name: "act-as-default"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "act-as-default"},
			Subjects: []rbacv1.Subject{
				{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "team-a"},
				{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "team-b"},
			},
		},
		// Bound to the group: alice passes only if the review carries the
		// request's groups, not just the user name.
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: bundleNamespace, Name: "team-a-sources"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "team-a-sources"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "team-a"}},
		},
	} {
		testenv.MustNotError(t, c.Create(ctx, obj), "creating %T %s", obj, obj.GetName())
	}
	alice := impersonate(t, env, "alice", "team-a")
	bob := impersonate(t, env, "bob", "team-b")

	gitAuth := func(secret string) rukpakv1alpha1.BundleSource {
		return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit, Git: &rukpakv1alpha1.GitSource{
			Repository: "https://git.example.com/repo.git", Ref: rukpakv1alpha1.GitRef{Tag: "v1"},
			Auth: &rukpakv1alpha1.Authorization{Secret: &rukpakv1alpha1.LocalObjectReference{Name: secret}},
		}}
	}
	httpAuth := func(secret string) rukpakv1alpha1.BundleSource {
		return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeHTTP, HTTP: &rukpakv1alpha1.HTTPSource{
			URL: "https://files.example.com/b.tgz", Auth: &rukpakv1alpha1.Authorization{Secret: &rukpakv1alpha1.LocalObjectReference{Name: secret}},
		}}
	}
	pull := func(secret string) rukpakv1alpha1.BundleSource {
		return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{
			Ref: "registry.example.com/b:v1", ImagePullSecretName: secret,
		}}
	}
	cms := func(names ...string) rukpakv1alpha1.BundleSource {
		src := rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps}
		for i, n := range names {
			src.ConfigMaps = append(src.ConfigMaps, rukpakv1alpha1.ConfigMapSource{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: n}, Path: "p" + strconv.Itoa(i)})
		}
		return src
	}

	cases := []struct {
		name   string
		client client.Client
		source rukpakv1alpha1.BundleSource
		want   string // the denial after "denied the request: ", relative to the source; "" when admitted
	}{
		{"git secret readable", alice, gitAuth("team-a-creds"), ""},
		{"git secret of another team", alice, gitAuth("team-b-creds"),
			`source.git.auth.secret.name: user "alice" may not get Secret rukpak-system/team-b-creds`},
		{"git secret without any read access", bob, gitAuth("team-a-creds"),
			`source.git.auth.secret.name: user "bob" may not get Secret rukpak-system/team-a-creds`},
		{"http secret", bob, httpAuth("team-a-creds"),
			`source.http.auth.secret.name: user "bob" may not get Secret rukpak-system/team-a-creds`},
		{"image pull secret", bob, pull("team-a-creds"),
			`source.image.pullSecret: user "bob" may not get Secret rukpak-system/team-a-creds`},
		{"image pull secret readable", alice, pull("team-a-creds"), ""},
		{"configMaps readable", alice, cms("team-a-content", "team-a-content"), ""},
		{"configMaps of another team", bob, cms("team-a-content"),
			`source.configMaps[0].configMap.name: user "bob" may not get ConfigMap rukpak-system/team-a-content`},
		// A denied user learns nothing about the ConfigMap: the same
		// message whether it is mutable or does not exist.
		{"mutable configMap not readable", bob, cms("team-a-mutable"),
			`source.configMaps[0].configMap.name: user "bob" may not get ConfigMap rukpak-system/team-a-mutable`},
		{"missing configMap not readable", bob, cms("absent"),
			`source.configMaps[0].configMap.name: user "bob" may not get ConfigMap rukpak-system/absent`},
		{"every denied reference is named", alice, cms("team-a-content", "other", "team-a-content", "other"),
			`source.configMaps[1].configMap.name: user "alice" may not get ConfigMap rukpak-system/other; ` +
				`spec.source.configMaps[3].configMap.name: user "alice" may not get ConfigMap rukpak-system/other`},
		// RukPak's refusal, in its words (checkRukPakDenial).
		{"readable but mutable configMap", alice, cms("team-a-mutable"), mutableRukPak},
	}
	for i, tc := range cases {
		b := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "access-" + strconv.Itoa(i)},
			Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Source: tc.source}}
		bd := &rukpakv1alpha1.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "access-" + strconv.Itoa(i)},
			Spec: rukpakv1alpha1.BundleDeploymentSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
				Template: rukpakv1alpha1.BundleTemplate{Spec: b.Spec}}}
		t.Run("Bundle/"+tc.name, func(t *testing.T) {
			if tc.want == mutableRukPak {
				checkRukPakDenial(t, tc.client.Create(ctx, b), webhook.BundleWebhookName, tc.want)
				return
			}
			checkAccessDenial(t, tc.client.Create(ctx, b), webhook.BundleWebhookName, "spec.", tc.want)
		})
		t.Run("BundleDeployment/"+tc.name, func(t *testing.T) {
			if tc.want == mutableRukPak {
				checkRukPakDenial(t, tc.client.Create(ctx, bd), webhook.BundleDeploymentWebhookName, tc.want)
				return
			}
			want := tc.want
			if want != "" && want != "invalid" {
				// Every field of the message moves under the template.
				want = strings.ReplaceAll(want, "spec.source.", "spec.template.spec.source.")
			}
			checkAccessDenial(t, tc.client.Create(ctx, bd), webhook.BundleDeploymentWebhookName, "spec.template.spec.", want)
		})
	}

	t.Run("BundleDeployment update to another team's Secret", func(t *testing.T) {
		var bd rukpakv1alpha1.BundleDeployment
		testenv.MustNotError(t, alice.Get(ctx, types.NamespacedName{Name: "access-0"}, &bd), "getting BundleDeployment")
		bd.Spec.Template.Spec.Source.Git.Auth.Secret.Name = "team-b-creds"
		checkAccessDenial(t, alice.Update(ctx, &bd), webhook.BundleDeploymentWebhookName, "spec.template.spec.",
			`source.git.auth.secret.name: user "alice" may not get Secret rukpak-system/team-b-creds`)
	})
	t.Run("BundleDeployment update keeping another team's Secret", func(t *testing.T) {
		// bob may update BundleDeployments, but pointing alice's at his own
		// server would send her credentials there: any source change is
		// reviewed for the updating user.
		var bd rukpakv1alpha1.BundleDeployment
		testenv.MustNotError(t, bob.Get(ctx, types.NamespacedName{Name: "access-0"}, &bd), "getting BundleDeployment")
		bd.Spec.Template.Spec.Source.Git.Repository = "https://bob.example.com/repo.git"
		checkAccessDenial(t, bob.Update(ctx, &bd), webhook.BundleDeploymentWebhookName, "spec.template.spec.",
			`source.git.auth.secret.name: user "bob" may not get Secret rukpak-system/team-a-creds`)
	})
	t.Run("metadata update by a user who may not read the Secret", func(t *testing.T) {
		var bd rukpakv1alpha1.BundleDeployment
		testenv.MustNotError(t, bob.Get(ctx, types.NamespacedName{Name: "access-0"}, &bd), "getting BundleDeployment")
		bd.Labels = map[string]string{"by": "bob"}
		testenv.MustNotError(t, bob.Update(ctx, &bd), "labelling a BundleDeployment")
	})
}

// checkAccessDenial asserts err is the exact Forbidden denial prefix+want of
// webhookName, an Invalid denial when want is "invalid", or nil when want
// is "".
const mutableRukPak = `bundle.spec.source.configmaps[0].configmap.name is invalid: configmap "team-a-mutable" is not immutable`

func checkAccessDenial(t *testing.T, err error, webhookName, prefix, want string) {
	t.Helper()
	switch want {
	case "":
		if err != nil {
			t.Fatalf("want admitted, got %v", err)
		}
		return
	case "invalid":
		if !apierrors.IsInvalid(err) {
			t.Fatalf("want Invalid, got %v", err)
		}
		return
	}
	full := `admission webhook "` + webhookName + `" denied the request: ` + prefix + want
	if err == nil || err.Error() != full {
		t.Fatalf("error:\n got %v\nwant %s", err, full)
	}
	if !apierrors.IsForbidden(err) {
		t.Fatalf("reason = %q, want Forbidden", apierrors.ReasonForError(err))
	}
}
