package webhook_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/webhook"
)

// testCatalogs: a Catalog's source follows a Bundle source's rules and
// may name only Secrets and ConfigMaps its author may get, on creation and
// on every source change; changes that leave the source alone pass.
func testCatalogs(t *testing.T, env *testenv.Env) {
	ctx := context.Background()
	c := env.Client
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: bundleNamespace, Name: "catalog-creds"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: bundleNamespace, Name: "catalog-content"}, Immutable: ptr.To(true)},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: bundleNamespace, Name: "catalog-mutable"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-catalog-author"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{rukpakv1alpha1.GroupVersion.Group}, Resources: []string{"catalogs"}, Verbs: []string{"get", "create", "update", "patch"},
		}}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "test-catalog-authors"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-catalog-author"},
			Subjects: []rbacv1.Subject{
				{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "catalog-team"},
				{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "others"},
			},
		},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: bundleNamespace, Name: "catalog-sources"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"catalog-creds"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"catalog-content", "catalog-mutable"}, Verbs: []string{"get"}},
		}},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: bundleNamespace, Name: "catalog-sources"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "catalog-sources"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "catalog-team"}},
		},
	} {
		testenv.MustNotError(t, c.Create(ctx, obj), "creating %T %s", obj, obj.GetName())
	}
	carol := impersonate(t, env, "carol", "catalog-team")
	dave := impersonate(t, env, "dave", "others")
	pull := func(secret string) rukpakv1alpha1.BundleSource {
		return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: "registry.example.com/catalog:latest", ImagePullSecretName: secret}}
	}
	cm := rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps, ConfigMaps: []rukpakv1alpha1.ConfigMapSource{{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: "catalog-content"}}}}
	mutable := rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps, ConfigMaps: []rukpakv1alpha1.ConfigMapSource{{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: "catalog-mutable"}}}}
	git := rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit, Git: &rukpakv1alpha1.GitSource{Repository: "https://git.example.com/c.git", Directory: "../up", Ref: rukpakv1alpha1.GitRef{Branch: "main"}}}
	catalog := func(name string, src rukpakv1alpha1.BundleSource) *rukpakv1alpha1.Catalog {
		return &rukpakv1alpha1.Catalog{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: rukpakv1alpha1.CatalogSpec{Source: src}}
	}
	const denied = "spec.source.image.pullSecret: "
	for _, tc := range []struct {
		name string
		as   client.Client
		obj  *rukpakv1alpha1.Catalog
		want string
	}{
		{"pull secret the author may read", carol, catalog("carol-image", pull("catalog-creds")), ""},
		{"pull secret the author may not read", dave, catalog("dave-image", pull("catalog-creds")), `user "dave" may not get Secret rukpak-system/catalog-creds`},
		{"an immutable ConfigMap", carol, catalog("carol-cm", cm), ""},
		// A Bundle source's refusals, in the same (RukPak's) words.
		{"a mutable ConfigMap is refused, as for a Bundle", carol, catalog("carol-mutable", mutable), `bundle.spec.source.configmaps[0].configmap.name is invalid: configmap "catalog-mutable" is not immutable`},
		{"git directory escaping", carol, catalog("carol-git", git), `bundle.spec.source.git.directory begins with "../": directory must define path within the repository`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.as.Create(ctx, tc.obj)
			if strings.HasPrefix(tc.want, "user ") {
				checkAccessDenial(t, err, webhook.CatalogWebhookName, denied, tc.want)
				return
			}
			checkAccessDenial(t, err, webhook.CatalogWebhookName, "", tc.want)
		})
	}
	t.Run("a change that leaves the source alone passes", func(t *testing.T) {
		var got rukpakv1alpha1.Catalog
		testenv.MustNotError(t, dave.Get(ctx, types.NamespacedName{Name: "carol-image"}, &got), "getting carol-image")
		got.Spec.Priority = 5
		got.Spec.PollInterval = &metav1.Duration{Duration: 10 * time.Minute}
		testenv.MustNotError(t, dave.Update(ctx, &got), "dave changes priority and pollInterval")
	})
	t.Run("a source change is reviewed for its author", func(t *testing.T) {
		var got rukpakv1alpha1.Catalog
		testenv.MustNotError(t, dave.Get(ctx, types.NamespacedName{Name: "carol-cm"}, &got), "getting carol-cm")
		got.Spec.Source = pull("catalog-creds")
		checkAccessDenial(t, dave.Update(ctx, &got), webhook.CatalogWebhookName, denied, `user "dave" may not get Secret rukpak-system/catalog-creds`)
	})
	t.Run("pollInterval under a minute is refused by the schema", func(t *testing.T) {
		obj := catalog("fast", pull(""))
		obj.Spec.PollInterval = &metav1.Duration{Duration: 30 * time.Second}
		err := carol.Create(ctx, obj)
		if err == nil || !strings.Contains(err.Error(), "pollInterval must be at least 1m") {
			t.Fatalf("got %v", err)
		}
	})
}

// testCatalogSourceOnlyInTemplates proves through the API server that a
// catalog source is resolved only from a BundleDeployment's template: a
// Bundle names its content, so one created (or a Catalog pointed) at a
// catalog is refused, while the same source in a template passes. The
// CRDs' schema refuses it before any webhook is called (so it holds while
// the webhook is down); the webhooks refuse it too (unit-tested in
// TestCatalogSourceRefusedOnBundlesAndCatalogs).
func testCatalogSourceOnlyInTemplates(t *testing.T, env *testenv.Env) {
	ctx := context.Background()
	c := env.Client
	src := rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeCatalog, Catalog: &rukpakv1alpha1.CatalogSource{PackageName: "kube-green", Version: "0.5.x"}}
	check := func(t *testing.T, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want %s", err, want)
		}
		if !apierrors.IsInvalid(err) {
			t.Fatalf("reason = %q, want Invalid", apierrors.ReasonForError(err))
		}
	}
	t.Run("a Bundle", func(t *testing.T) {
		b := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "from-catalog"}, Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassRegistry, Source: src}}
		check(t, c.Create(ctx, b), `bundle.spec.source.type "catalog" is for bundle deployment templates only: a Bundle's source names its content`)
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), &rukpakv1alpha1.Bundle{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the refused Bundle: %v, want NotFound", err)
		}
	})
	t.Run("a Catalog", func(t *testing.T) {
		cat := &rukpakv1alpha1.Catalog{ObjectMeta: metav1.ObjectMeta{Name: "from-catalog"}, Spec: rukpakv1alpha1.CatalogSpec{Source: src}}
		check(t, c.Create(ctx, cat), `spec.source.type "catalog" is for bundle deployment templates only`)
	})
	t.Run("a BundleDeployment's template", func(t *testing.T) {
		bd := &rukpakv1alpha1.BundleDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: "from-catalog"},
			Spec: rukpakv1alpha1.BundleDeploymentSpec{
				ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
				Template:             rukpakv1alpha1.BundleTemplate{Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassRegistry, Source: src}},
			},
		}
		testenv.MustNotError(t, c.Create(ctx, bd), "creating a BundleDeployment with a catalog source")
		testenv.MustNotError(t, c.Delete(ctx, bd), "deleting it")
	})
}
