package provisioner_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// TestIntegrationInstallNamespaceReadFromCache proves that reconciles of
// a registry+v1 BundleDeployment whose install namespace the conversion
// creates ask the cache of Namespaces whose it is, not the API server (one
// GET per reconcile before), counted with the API server's own request
// counts; and that the namespace it created is still its own.
func TestIntegrationInstallNamespaceReadFromCache(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	bd := newBD("nsread", h.pushEtcd())
	bd.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	bd.Spec.Template.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	bd.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(`{"installNamespace":"nsread-a","watchNamespaces":["nsread-a"]}`)}
	if err := h.c.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}
	h.waitBD(bd.Name, rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	ns := &corev1.Namespace{}
	testenv.MustNotError(t, h.c.Get(ctx, client.ObjectKey{Name: "nsread-a"}, ns), "reading the install namespace")
	if owner := ns.Labels[rukpakv1alpha1.LabelOwnerName]; owner != bd.Name {
		t.Fatalf("install namespace owned by %q, want %q", owner, bd.Name)
	}

	before, err := testenv.ServerRequests(ctx, h.env.Config)
	testenv.MustNotError(t, err, "reading request counts")
	const reconciles = 3
	for i := range reconciles {
		h.requestReconcile(bd.Name, fmt.Sprintf("ns-%d", i))
	}
	after, err := testenv.ServerRequests(ctx, h.env.Config)
	testenv.MustNotError(t, err, "reading request counts")
	got := after.Sub(before)
	t.Logf("requests of %d reconciles: %s", reconciles, got)
	if gets := got[testenv.RequestKey{Verb: "GET", Resource: "namespaces"}]; gets > 0 {
		t.Errorf("%.0f Namespace GETs in %d reconciles, want none (read from the cache)", gets, reconciles)
	}
	h.waitBD(bd.Name, rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
}
