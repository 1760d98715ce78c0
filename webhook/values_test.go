package webhook_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/webhook"
)

// testValuesFrom: a helm-class BundleDeployment's values sources
// (spec.config.valuesFrom) are reviewed like a source's Secrets: the
// creator, and whoever changes the spec later, must be allowed to get each
// one. carol (group values-a) may read team-a-values only; dave (group
// values-d) may edit BundleDeployments and read nothing in the
// provisioners' namespace.
func testValuesFrom(t *testing.T, env *testenv.Env) {
	ctx := context.Background()
	labelled := map[string]string{"core.rukpak.io/helm-values": "true"}
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: bundleNamespace, Name: "team-a-values", Labels: labelled},
			StringData: map[string]string{"values.yaml": "replicas: 2\n"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: bundleNamespace, Name: "team-b-values", Labels: labelled},
			StringData: map[string]string{"values.yaml": "db: {password: s3cret}\n"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: bundleNamespace, Name: "team-b-config", Labels: labelled},
			Data: map[string]string{"values.yaml": "a: 1\n"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-values-author"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{rukpakv1alpha1.GroupVersion.Group}, Resources: []string{"bundledeployments"},
			Verbs: []string{"get", "create", "update", "patch"},
		}}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "test-values-authors"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-values-author"},
			Subjects: []rbacv1.Subject{
				{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "values-a"},
				{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "values-d"},
			},
		},
		// Their BundleDeployments name no ServiceAccount: they install as
		// the webhook's default, which both may impersonate, so only the
		// values sources are in question here.
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: defaultSA.Namespace, Name: "values-act-as-default"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{defaultSA.Name}, Verbs: []string{"impersonate"}},
		}},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: defaultSA.Namespace, Name: "values-act-as-default"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "values-act-as-default"},
			Subjects: []rbacv1.Subject{
				{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "values-a"},
				{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "values-d"},
			},
		},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: bundleNamespace, Name: "team-a-values"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"team-a-values"}, Verbs: []string{"get"}},
		}},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: bundleNamespace, Name: "team-a-values"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "team-a-values"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "values-a"}},
		},
	} {
		testenv.MustNotError(t, env.Client.Create(ctx, obj), "creating %T %s", obj, obj.GetName())
	}
	carol := impersonate(t, env, "carol", "values-a")
	dave := impersonate(t, env, "dave", "values-d")

	bd := func(name, class, config string) *rukpakv1alpha1.BundleDeployment {
		return &rukpakv1alpha1.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: rukpakv1alpha1.BundleDeploymentSpec{
				ProvisionerClassName: class,
				Config:               &apiextensionsv1.JSON{Raw: []byte(config)},
				Template: rukpakv1alpha1.BundleTemplate{Spec: rukpakv1alpha1.BundleSpec{
					ProvisionerClassName: rukpakv1alpha1.ProvisionerClassHelm,
					Source:               rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: "registry.example.com/chart:v1"}},
				}},
			}}
	}
	helmBD := func(name, config string) *rukpakv1alpha1.BundleDeployment {
		return bd(name, rukpakv1alpha1.ProvisionerClassHelm, config)
	}
	const (
		ownValues   = `{"installNamespace":"apps","valuesFrom":[{"kind":"Secret","name":"team-a-values"}]}`
		otherValues = `{"installNamespace":"apps","valuesFrom":[{"kind":"Secret","name":"team-a-values"},{"kind":"Secret","name":"team-b-values","optional":true}]}`
	)
	update := func(c client.Client, name string, edit func(*rukpakv1alpha1.BundleDeployment)) error {
		var got rukpakv1alpha1.BundleDeployment
		testenv.MustNotError(t, c.Get(ctx, types.NamespacedName{Name: name}, &got), "getting BundleDeployment %s", name)
		edit(&got)
		return c.Update(ctx, &got)
	}
	setConfig := func(config string) func(*rukpakv1alpha1.BundleDeployment) {
		return func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(config)} }
	}

	t.Run("create naming another team's Secret", func(t *testing.T) {
		checkAccessDenial(t, carol.Create(ctx, helmBD("values-other", `{"installNamespace":"apps","valuesFrom":[{"kind":"Secret","name":"team-b-values"}]}`)),
			webhook.BundleDeploymentWebhookName, "spec.config.valuesFrom[0].name: ", `user "carol" may not get Secret rukpak-system/team-b-values`)
	})
	t.Run("create naming another team's ConfigMap, and one that does not exist", func(t *testing.T) {
		// The same denial for both: the user learns nothing about either.
		checkAccessDenial(t, carol.Create(ctx, helmBD("values-other-cm", `{"installNamespace":"apps","valuesFrom":[{"kind":"ConfigMap","name":"team-b-config"},{"kind":"Secret","name":"absent"}]}`)),
			webhook.BundleDeploymentWebhookName, "spec.config.valuesFrom[0].name: ",
			`user "carol" may not get ConfigMap rukpak-system/team-b-config; spec.config.valuesFrom[1].name: user "carol" may not get Secret rukpak-system/absent`)
	})
	t.Run("create naming the creator's own Secret", func(t *testing.T) {
		checkAccessDenial(t, carol.Create(ctx, helmBD("values-own", ownValues)), webhook.BundleDeploymentWebhookName, "", "")
	})
	t.Run("update adding another team's Secret", func(t *testing.T) {
		// optional changes nothing: an optional source is read when it is
		// there.
		checkAccessDenial(t, update(carol, "values-own", setConfig(otherValues)),
			webhook.BundleDeploymentWebhookName, "spec.config.valuesFrom[1].name: ", `user "carol" may not get Secret rukpak-system/team-b-values`)
	})
	t.Run("update of the template by a user who may not read the sources", func(t *testing.T) {
		// dave's chart would get carol's values.
		checkAccessDenial(t, update(dave, "values-own", func(bd *rukpakv1alpha1.BundleDeployment) {
			bd.Spec.Template.Spec.Source.Image.Ref = "dave.example.com/leak:v1"
		}), webhook.BundleDeploymentWebhookName, "spec.config.valuesFrom[0].name: ", `user "dave" may not get Secret rukpak-system/team-a-values`)
	})
	t.Run("metadata update by a user who may not read the sources", func(t *testing.T) {
		testenv.MustNotError(t, update(dave, "values-own", func(bd *rukpakv1alpha1.BundleDeployment) {
			bd.Labels = map[string]string{"by": "dave"}
		}), "labelling a BundleDeployment")
	})
	t.Run("other classes do not read valuesFrom; switching to helm is reviewed", func(t *testing.T) {
		config := `{"valuesFrom":[{"kind":"Secret","name":"team-b-values"}]}`
		checkAccessDenial(t, carol.Create(ctx, bd("values-plain", rukpakv1alpha1.ProvisionerClassPlain, config)), webhook.BundleDeploymentWebhookName, "", "")
		checkAccessDenial(t, update(carol, "values-plain", func(bd *rukpakv1alpha1.BundleDeployment) {
			bd.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassHelm
		}), webhook.BundleDeploymentWebhookName, "spec.config.valuesFrom[0].name: ", `user "carol" may not get Secret rukpak-system/team-b-values`)
	})
	t.Run("malformed sources are invalid", func(t *testing.T) {
		for i, tc := range []struct{ config, want string }{
			{`{"valuesFrom":[{"kind":"Pod","name":"p"}]}`, `spec.config.valuesFrom[0].kind: Unsupported value: "Pod": supported values: "ConfigMap", "Secret"`},
			{`{"valuesFrom":[{"kind":"Secret"}]}`, `spec.config.valuesFrom[0].name: Required value`},
			{`{"valuesFrom":{"kind":"Secret","name":"s"}}`, `spec.config: Invalid value: valuesFrom must be a list of {kind, name, key, optional}`},
			{`{"valuesFrom":[{"kind":"Secret","name":"../s"}]}`, `spec.config.valuesFrom[0].name: Invalid value: "../s"`},
		} {
			err := carol.Create(ctx, helmBD(fmt.Sprintf("values-bad-%d", i), tc.config))
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: got %v, want Invalid with %q", tc.config, err, tc.want)
			}
		}
	})
}
