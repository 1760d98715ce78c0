package provisioner_test

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/metrics"
)

// TestIntegrationSettledReconcileTakesNoObjects proves that the reconciles
// an installed BundleDeployment's objects queue by changing their status
// (a Deployment becoming available, then not) run no step at all: not
// even taking the objects from the object cache, which decodes them. Its
// Healthy condition follows the Deployment all the same. An edit of the
// Deployment's spec still goes the full way and is corrected.
func TestIntegrationSettledReconcileTakesNoObjects(t *testing.T) {
	// Not parallel: it counts the steps of every reconcile in the process.
	h := newHarness(t)
	ctx := context.Background()
	src := h.pushBundle("settled-v1", map[string]string{
		"manifests/cm.yaml":     configMap("settled-config", "v"),
		"manifests/deploy.yaml": restartDeployment("settled-web"),
	})
	if err := h.c.Create(ctx, newBD("settled", src)); err != nil {
		t.Fatal(err)
	}
	h.waitBD("settled", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	h.waitBD("settled", rukpakv1alpha1.TypeHealthy, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnhealthy, "")

	// available, then not: two reconciles queued by status changes alone.
	toggle := func() map[string]float64 {
		t.Helper()
		before := metrics.Steps()
		rollOutDeployment(t, h, "settled-web")
		h.waitBD("settled", rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "")
		stallDeployment(t, h, "settled-web")
		h.waitBD("settled", rukpakv1alpha1.TypeHealthy, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnhealthy, "")
		return stepsSince(before)
	}
	// The reconcile right after the install may find the release record it
	// wrote not yet shown by the informer, and not settle; one of the next
	// does.
	settled := false
	for i := 0; i < 5 && !settled; i++ {
		settled = noStep(toggle())
	}
	if !settled {
		t.Fatal("five rounds of status changes each ran reconcile steps")
	}
	for i := range 2 {
		if got := toggle(); !noStep(got) {
			t.Errorf("round %d of status changes of a settled BundleDeployment ran steps: %v", i, got)
		}
	}

	// An edit of the Deployment's spec: the full way (objects taken from
	// the cache), and corrected.
	before := metrics.Steps()
	dep := &appsv1.Deployment{}
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "settled-web"}, dep); err != nil {
		t.Fatal(err)
	}
	dep.Spec.Replicas = new(int32(3))
	if err := h.c.Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the edited Deployment corrected", func() error {
		got := &appsv1.Deployment{}
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(dep), got); err != nil {
			return err
		}
		if got.Spec.Replicas == nil || *got.Spec.Replicas != 1 {
			return fmt.Errorf("replicas %v", got.Spec.Replicas)
		}
		return nil
	})
	if got := stepsSince(before); got[metrics.StepCached]+got[metrics.StepLoad] == 0 {
		t.Errorf("an edited Deployment was corrected without the objects to correct it from: %v", got)
	}
}

// noStep: no step ran, not even taking the objects from the cache.
func noStep(m map[string]float64) bool {
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return true
}

// stallDeployment writes a Deployment's status as its controller would
// once its pod is no longer available.
func stallDeployment(t *testing.T, h *harness, name string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, "stalling Deployment "+name, func() error {
		dep := &appsv1.Deployment{}
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, dep); err != nil {
			return err
		}
		now := metav1.Now()
		dep.Status = appsv1.DeploymentStatus{
			ObservedGeneration: dep.Generation,
			Replicas:           1, UpdatedReplicas: 1, UnavailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: now, LastTransitionTime: now},
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable", LastUpdateTime: now, LastTransitionTime: now},
			},
		}
		return h.c.Status().Update(ctx, dep)
	})
}
