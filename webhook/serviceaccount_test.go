package webhook_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/webhook"
)

// testServiceAccount: a BundleDeployment may name only a ServiceAccount its
// creator may impersonate (after testAccess, whose users may create
// BundleDeployments); a change of it is reviewed for the updating user,
// other updates are not.
func testServiceAccount(t *testing.T, env *testenv.Env) {
	ctx := context.Background()
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sa-tenant"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "sa-tenant", Name: "act-as-installer"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{"installer"}, Verbs: []string{"impersonate"}},
		}},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "sa-tenant", Name: "act-as-installer"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "act-as-installer"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "team-a"}},
		},
	} {
		testenv.MustNotError(t, env.Client.Create(ctx, obj), "creating %T %s", obj, obj.GetName())
	}
	alice := impersonate(t, env, "alice", "team-a")
	bob := impersonate(t, env, "bob", "team-b")
	bd := func(sa string) *rukpakv1alpha1.BundleDeployment {
		return &rukpakv1alpha1.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "sa-" + sa},
			Spec: rukpakv1alpha1.BundleDeploymentSpec{
				ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
				ServiceAccount:       &rukpakv1alpha1.ServiceAccountReference{Namespace: "sa-tenant", Name: sa},
				Template: rukpakv1alpha1.BundleTemplate{Spec: rukpakv1alpha1.BundleSpec{
					ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
					Source:               rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: "registry.example.com/b:v1"}},
				}},
			}}
	}
	const prefix = "spec.serviceAccount: "
	t.Run("a ServiceAccount the creator may not impersonate", func(t *testing.T) {
		checkAccessDenial(t, bob.Create(ctx, bd("installer")), webhook.BundleDeploymentWebhookName, prefix,
			`user "bob" may not impersonate ServiceAccount sa-tenant/installer, which the provisioner would install as`)
		checkAccessDenial(t, alice.Create(ctx, bd("other")), webhook.BundleDeploymentWebhookName, prefix,
			`user "alice" may not impersonate ServiceAccount sa-tenant/other, which the provisioner would install as`)
	})
	t.Run("a ServiceAccount the creator may impersonate", func(t *testing.T) {
		checkAccessDenial(t, alice.Create(ctx, bd("installer")), webhook.BundleDeploymentWebhookName, prefix, "")
	})
	t.Run("changing it is reviewed for the updating user", func(t *testing.T) {
		var got rukpakv1alpha1.BundleDeployment
		testenv.MustNotError(t, bob.Get(ctx, types.NamespacedName{Name: "sa-installer"}, &got), "getting BundleDeployment")
		got.Spec.ServiceAccount.Name = "other"
		checkAccessDenial(t, bob.Update(ctx, &got), webhook.BundleDeploymentWebhookName, prefix,
			`user "bob" may not impersonate ServiceAccount sa-tenant/other, which the provisioner would install as`)
	})
	t.Run("other changes are not", func(t *testing.T) {
		var got rukpakv1alpha1.BundleDeployment
		testenv.MustNotError(t, bob.Get(ctx, types.NamespacedName{Name: "sa-installer"}, &got), "getting BundleDeployment")
		got.Spec.Paused = true
		testenv.MustNotError(t, bob.Update(ctx, &got), "pausing a BundleDeployment bob may not install as")
	})
}
