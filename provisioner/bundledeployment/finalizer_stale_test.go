package bundledeployment

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// TestEnsureFinalizerFromStaleCache: a reconcile reads bd from a cache that
// has seen neither the finalizer patch nor the status write of the
// reconcile before (this process's own writes). ensureFinalizer patches
// again; the reconcile must then go on from the status the API server
// holds, not from the cache's stale one with a newer resourceVersion
// (which also makes catchUp take the stale status for a caught-up one).
func TestEnsureFinalizerFromStaleCache(t *testing.T) {
	server := &rukpakv1alpha1.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "app", UID: "bd-uid", Finalizers: []string{rukpakv1alpha1.FinalizerUninstall}},
		Spec:       rukpakv1alpha1.BundleDeploymentSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Paused: true},
		Status: rukpakv1alpha1.BundleDeploymentStatus{
			Conditions: []metav1.Condition{{Type: rukpakv1alpha1.TypeInstalled, Status: metav1.ConditionTrue, Reason: "x", LastTransitionTime: metav1.Now()}},
		},
	}
	c := fake.NewClientBuilder().WithScheme(intentScheme(t)).WithStatusSubresource(&rukpakv1alpha1.BundleDeployment{}).WithObjects(server).Build()
	stored := &rukpakv1alpha1.BundleDeployment{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "app"}, stored); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: c}
	// This process wrote that status from the version the cache still holds.
	r.records.wrote(stored, "1")
	cached := stored.DeepCopy()
	cached.ResourceVersion = "1"
	cached.Finalizers = nil
	cached.Status.Conditions[0].Status = metav1.ConditionFalse

	if err := r.ensureFinalizer(context.Background(), cached); err != nil {
		t.Fatal(err)
	}
	r.records.load(cached)
	r.records.catchUp(cached)
	if got := cached.Status.Conditions[0].Status; got != metav1.ConditionTrue {
		t.Errorf("after ensureFinalizer the reconcile goes on with Installed=%s at resourceVersion %s; the API server holds Installed=True", got, cached.ResourceVersion)
	}
}
