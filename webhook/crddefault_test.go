package webhook_test

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/provisioner/crdaccess"
	"github.com/rukpak-dev/rukpak/webhook"
	"github.com/rukpak-dev/rukpak/webhook/certs"
)

// TestCRDCheckDefaultInstall runs the webhook with the rights of the
// shipped manifests alone, and then beside the provisioner's keeper of
// ClusterRole rukpak-webhook-crd-check (running as the provisioner's
// ServiceAccount): without the role it admits with a warning naming it;
// with it, as in every default install, it refuses a breaking edit; the
// role follows the release-owned CRDs and is restored when deleted.
func TestCRDCheckDefaultInstall(t *testing.T) {
	env := startEnv(t, "localhost")
	ctx := context.Background()
	c := env.Client
	applyFile(t, c, filepath.Join(testenv.RepoRoot(), "manifests", "base", "webhook", "rbac.yaml"))
	applyFile(t, c, filepath.Join(testenv.RepoRoot(), "manifests", "base", "provisioner", "rbac.yaml"))
	asWebhook := impersonated(env, "system:serviceaccount:rukpak-system:rukpak-webhook", "system:serviceaccounts", "system:serviceaccounts:rukpak-system")
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
	admin := newCRDClient(t, env.Config)
	mustCreate(t, c, imageBD("owner", nil))
	guarded := newWidgets(t, env, admin, "guarded", "owner", "red", "blue")
	early := newWidgets(t, env, admin, "early", "owner", "blue")
	newWidgets(t, env, admin, "foreign", "", "blue")

	t.Run("without the provisioner's ClusterRole it admits with a warning naming it", func(t *testing.T) {
		testenv.MustNotError(t, early.update(admin, narrowEnum), "narrowing the enum")
		w := admin.takeWarnings()
		wantWarning(t, w, "CRD early."+crdGroup+" was not checked against its existing objects: the webhook may not list them")
		wantWarning(t, w, "in ClusterRole "+webhook.DefaultCRDCheckClusterRole+", bound to the webhook's ServiceAccount")
	})

	asProvisioner := impersonated(env, "system:serviceaccount:rukpak-system:rukpak-provisioner", "system:serviceaccounts", "system:serviceaccounts:rukpak-system")
	runCRDAccess(t, env, asProvisioner)
	waitForRules(t, c, []rbacv1.PolicyRule{{APIGroups: []string{crdGroup}, Resources: []string{"early", "guarded"}, Verbs: []string{"list"}}})

	t.Run("a default install refuses a breaking edit", func(t *testing.T) {
		want := guarded.preflightMessage(narrowEnum)
		wantDenied(t, guarded.update(admin, narrowEnum), want)
	})
	t.Run("the role follows the release-owned CRDs", func(t *testing.T) {
		testenv.MustNotError(t, admin.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, early.name, metav1.DeleteOptions{}), "deleting a CRD")
		waitForRules(t, c, []rbacv1.PolicyRule{{APIGroups: []string{crdGroup}, Resources: []string{"guarded"}, Verbs: []string{"list"}}})
		testenv.MustNotError(t, guarded.update(admin, func(crd *apiextensionsv1.CustomResourceDefinition) {
			delete(crd.Labels, "core.rukpak.io/owner-kind")
		}), "disowning a CRD")
		waitForRules(t, c, nil)
	})
	t.Run("a deleted role is written again", func(t *testing.T) {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: webhook.DefaultCRDCheckClusterRole}}
		testenv.MustNotError(t, c.Delete(ctx, role), "deleting the role")
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, testenv.WaitTimeout, true, func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKeyFromObject(role), &rbacv1.ClusterRole{})
			return err == nil, client.IgnoreNotFound(err)
		})
		testenv.MustNotError(t, err, "waiting for the role to be written again")
	})
}

// runCRDAccess runs the provisioner's keeper of the webhook's ClusterRole
// with restCfg's rights until the test ends.
func runCRDAccess(t *testing.T, env *testenv.Env, restCfg *rest.Config) {
	t.Helper()
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 env.Env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	testenv.MustNotError(t, err, "creating manager")
	testenv.MustNotError(t, crdaccess.Setup(mgr, webhook.DefaultCRDCheckClusterRole, nil), "setting up crdaccess")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager stopped with error: %v", err)
		}
	})
}

// waitForRules waits until the webhook's ClusterRole grants exactly want
// (nil: nothing).
func waitForRules(t *testing.T, c client.Client, want []rbacv1.PolicyRule) {
	t.Helper()
	var last []rbacv1.PolicyRule
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, testenv.WaitTimeout, true, func(ctx context.Context) (bool, error) {
		role := &rbacv1.ClusterRole{}
		if err := c.Get(ctx, client.ObjectKey{Name: webhook.DefaultCRDCheckClusterRole}, role); apierrors.IsNotFound(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		last = role.Rules
		return slices.EqualFunc(role.Rules, want, equalRule), nil
	})
	if err != nil {
		t.Fatalf("ClusterRole %s: rules %+v, want %+v: %v", webhook.DefaultCRDCheckClusterRole, last, want, err)
	}
}

func equalRule(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) && slices.Equal(a.Verbs, b.Verbs) &&
		len(a.ResourceNames) == 0 && len(b.ResourceNames) == 0 && len(a.NonResourceURLs) == 0
}
