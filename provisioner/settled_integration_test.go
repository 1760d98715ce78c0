package provisioner_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/metrics"
)

// TestIntegrationSettledReconcileTakesNoObjects proves that the reconciles
// an installed BundleDeployment's objects queue by changing their status,
// from the first after the install on,
// (a Deployment becoming available, then not) run no step at all: not
// even taking the objects from the object cache, which decodes them. Its
// Healthy condition follows the Deployment all the same, and its other
// conditions stay. What changes an object other than in its status goes
// the full way and is corrected: a label taken off the Deployment (its
// generation stays), its spec edited, a ConfigMap's data edited; so does
// a requested reconcile.
func TestIntegrationSettledReconcileTakesNoObjects(t *testing.T) {
	// Not parallel: it counts the steps of every reconcile in the process.
	h := newHarness(t)
	ctx := context.Background()
	src := h.pushBundle("settled-v1", map[string]string{
		"manifests/cm.yaml":     configMap("settled-config", "v"),
		"manifests/deploy.yaml": strings.Replace(restartDeployment("settled-web"), "  namespace: default\n", "  namespace: default\n  labels: {tier: web}\n", 1),
	})
	installing := metrics.Steps()
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
	// Settled by the install itself, with the release records as its own
	// writes left them (whether the informer showed them yet or not): the
	// first status changes after it take nothing either.
	if got := toggle(); !noStep(got) {
		t.Errorf("status changes right after the install ran steps: %v", got)
	}
	if got := stepsSince(installing); got[metrics.StepLoad] != 1 || got[metrics.StepDecode] != 1 || got[metrics.StepCached] != 0 {
		t.Errorf("from create to settled: want the content loaded and decoded once and never taken from the cache again, got %v", got)
	}
	for i := range 2 {
		if got := toggle(); !noStep(got) {
			t.Errorf("round %d of status changes of a settled BundleDeployment ran steps: %v", i, got)
		}
	}
	h.waitBD("settled", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	h.waitBD("settled", rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionTrue, rukpakv1alpha1.ReasonUnpackSuccessful, "")

	// fullWay asserts that what changed went the full way: its objects
	// taken from the cache (or loaded).
	fullWay := func(what string, before map[string]float64) {
		t.Helper()
		if got := stepsSince(before); got[metrics.StepCached]+got[metrics.StepLoad] == 0 {
			t.Errorf("%s: no reconcile took the objects: %v", what, got)
		}
	}

	// A label taken off: the generation stays, the labels tell.
	before := metrics.Steps()
	dep := &appsv1.Deployment{}
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "settled-web"}, dep); err != nil {
		t.Fatal(err)
	}
	delete(dep.Labels, "tier")
	if err := h.c.Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Deployment's label restored", func() error {
		got := &appsv1.Deployment{}
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(dep), got); err != nil {
			return err
		}
		if got.Labels["tier"] != "web" {
			return fmt.Errorf("labels %v", got.Labels)
		}
		return nil
	})
	fullWay("a label taken off", before)

	// A ConfigMap's data.
	before = metrics.Steps()
	cm, err := h.getCM("settled-config")
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["value"] = "edited"
	if err := h.c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ConfigMap's data restored", func() error {
		got, err := h.getCM("settled-config")
		if err != nil {
			return err
		}
		if got.Data["value"] == "edited" {
			return fmt.Errorf("data %v", got.Data)
		}
		return nil
	})
	fullWay("a ConfigMap edited", before)

	// A requested reconcile.
	before = metrics.Steps()
	h.requestReconcile("settled", "full")
	fullWay("a requested reconcile", before)

	// An edit of the Deployment's spec.
	before = metrics.Steps()
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
	fullWay("the Deployment's spec edited", before)
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
	writeDeploymentStatus(t, h, name, "stalling", func(generation int64, now metav1.Time) appsv1.DeploymentStatus {
		return appsv1.DeploymentStatus{
			ObservedGeneration: generation,
			Replicas:           1, UpdatedReplicas: 1, UnavailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: now, LastTransitionTime: now},
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable", LastUpdateTime: now, LastTransitionTime: now},
			},
		}
	})
}
