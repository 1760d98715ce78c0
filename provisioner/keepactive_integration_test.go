package provisioner_test

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/bundledeployment"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
)

const keepDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: keep-web
  namespace: default
spec:
  replicas: 1
  selector:
    matchLabels: {app: keep-web}
  template:
    metadata:
      labels: {app: keep-web}
    spec:
      containers:
      - name: web
        image: registry.example/web:1
`

// While the Bundle of a new template cannot be installed (its unpack
// failed, or waits for its source), the active Bundle stays installed:
// HasValidBundle reports the new Bundle, and the active release is still
// drift-corrected and its health reported. Once the new Bundle unpacks, the
// pivot proceeds.
func TestIntegrationActiveBundleKeptWhileNewOneUnresolved(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()

	v1 := h.pushBundle("keep-v1", map[string]string{"manifests/objs.yaml": keepDeployment + "---\n" + configMap("keep-config", "v1")})
	if err := h.c.Create(ctx, newBD("keep", v1)); err != nil {
		t.Fatal(err)
	}
	bd := h.waitBD("keep", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	active := bd.Status.ActiveBundle
	installed := fmt.Sprintf("Instantiated bundle %q successfully", active)
	// No deployment controller runs against envtest: the Deployment is
	// unhealthy until a test writes its status.
	const unrolled = "Unhealthy objects: Deployment default/keep-web: LessReplicas: Replicas: 0/1"
	h.waitBDExact("keep", rukpakv1alpha1.TypeHealthy, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnhealthy, unrolled)

	// generatedName is the Bundle a template change makes.
	generatedName := func() string {
		t.Helper()
		hash, err := bundledeployment.TemplateHash(h.bd("keep").Spec.Template)
		if err != nil {
			t.Fatal(err)
		}
		return "keep-" + hash
	}
	// replaceDeployment deletes the active release's Deployment and waits
	// for drift correction to create it again.
	replaceDeployment := func() {
		t.Helper()
		dep := &appsv1.Deployment{}
		key := client.ObjectKey{Namespace: "default", Name: "keep-web"}
		if err := h.c.Get(ctx, key, dep); err != nil {
			t.Fatal(err)
		}
		old := dep.UID
		if err := h.c.Delete(ctx, dep); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the Deployment restored", func() error {
			dep := &appsv1.Deployment{}
			if err := h.c.Get(ctx, key, dep); err != nil {
				return err
			}
			if dep.UID == old || !dep.DeletionTimestamp.IsZero() {
				return fmt.Errorf("still the deleted Deployment %s", old)
			}
			return nil
		})
	}
	// rollOut writes the Deployment's status as its controller would.
	rollOut := func(ready bool) {
		t.Helper()
		dep := &appsv1.Deployment{}
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "keep-web"}, dep); err != nil {
			t.Fatal(err)
		}
		available, n := corev1.ConditionTrue, int32(1)
		if !ready {
			available, n = corev1.ConditionFalse, 0
		}
		dep.Status = appsv1.DeploymentStatus{
			ObservedGeneration: dep.Generation,
			Replicas:           1, UpdatedReplicas: 1, ReadyReplicas: n, AvailableReplicas: n, UnavailableReplicas: 1 - n,
			Conditions: []appsv1.DeploymentCondition{{
				Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable",
				LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now(),
			}, {
				Type: appsv1.DeploymentAvailable, Status: available, Reason: "MinimumReplicasAvailable",
				LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now(),
			}},
		}
		if err := h.c.Status().Update(ctx, dep); err != nil {
			t.Fatal(err)
		}
	}
	// stillActive checks the active Bundle is installed as it was, and the
	// new one kept (not superseded).
	stillActive := func(pending string) {
		t.Helper()
		bd := h.waitBDExact("keep", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, installed)
		if bd.Status.ActiveBundle != active {
			t.Errorf("activeBundle %q, want %q", bd.Status.ActiveBundle, active)
		}
		h.bundle(pending)
		if cm, err := h.getCM("keep-config"); err != nil || cm.Data["value"] != "v1" {
			t.Errorf("keep-config: %v, %v; want value v1", cm.Data, err)
		}
	}

	t.Run("a new bundle that failed to unpack", func(t *testing.T) {
		bad := v1.DeepCopy()
		bad.Image.Ref = h.reg.Ref("bundles:keep-missing")
		h.updateBD("keep", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = *bad })
		failed := generatedName()
		h.waitBD("keep", rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnpackFailed, "keep-missing")
		b := h.bundle(failed)
		h.waitBDExact("keep", rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnpackFailed,
			fmt.Sprintf("Failed to unpack the %s Bundle: %s", failed, conditions.Get(b.Status.Conditions, rukpakv1alpha1.TypeUnpacked).Message))

		replaceDeployment()
		h.waitBDExact("keep", rukpakv1alpha1.TypeHealthy, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnhealthy, unrolled)
		rollOut(true)
		h.waitBDExact("keep", rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "All installed objects are healthy")
		stillActive(failed)
	})

	var pending string
	t.Run("a new bundle whose source does not exist yet", func(t *testing.T) {
		h.updateBD("keep", func(bd *rukpakv1alpha1.BundleDeployment) {
			bd.Spec.Template.Spec.Source = rukpakv1alpha1.BundleSource{
				Type:       rukpakv1alpha1.SourceTypeConfigMaps,
				ConfigMaps: []rukpakv1alpha1.ConfigMapSource{{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: "keep-v2"}, Path: "manifests"}},
			}
		})
		pending = generatedName()
		h.waitBDExact("keep", rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnpackFailed,
			fmt.Sprintf("Failed to unpack the %s Bundle: source bundle content: get configmap %s/keep-v2: ConfigMap \"keep-v2\" not found", pending, namespace))

		cm, err := h.getCM("keep-config")
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["value"] = "tampered"
		if err := h.c.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		replaceDeployment()
		h.waitBDExact("keep", rukpakv1alpha1.TypeHealthy, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnhealthy, unrolled)
		rollOut(false)
		h.waitBDExact("keep", rukpakv1alpha1.TypeHealthy, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnhealthy,
			"Unhealthy objects: Deployment default/keep-web: LessAvailable: Available: 0/1")
		eventually(t, "keep-config restored", func() error {
			cm, err := h.getCM("keep-config")
			if err != nil {
				return err
			}
			if cm.Data["value"] != "v1" {
				return fmt.Errorf("value %q", cm.Data["value"])
			}
			return nil
		})
		stillActive(pending)
	})

	t.Run("the pivot proceeds once the new bundle unpacks", func(t *testing.T) {
		src := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "keep-v2"},
			Immutable:  ptr.To(true),
			Data:       map[string]string{"cm.yaml": configMap("keep-config", "v2")},
		}
		if err := h.c.Create(ctx, src); err != nil {
			t.Fatal(err)
		}
		bd := h.waitBDExact("keep", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded,
			fmt.Sprintf("Instantiated bundle %q successfully", pending))
		if bd.Status.ActiveBundle != pending {
			t.Errorf("activeBundle %q, want %q", bd.Status.ActiveBundle, pending)
		}
		h.waitBDExact("keep", rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionTrue, rukpakv1alpha1.ReasonUnpackSuccessful,
			fmt.Sprintf("Successfully unpacked the %s Bundle", pending))
		h.waitBDExact("keep", rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "All installed objects are healthy")
		eventually(t, "the Deployment removed and the superseded bundles deleted", func() error {
			if err := h.c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "keep-web"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the Deployment is still there: %w", err)
			}
			list := &rukpakv1alpha1.BundleList{}
			if err := h.c.List(ctx, list, client.MatchingLabels{rukpakv1alpha1.LabelOwnerName: "keep"}); err != nil {
				return err
			}
			if len(list.Items) != 1 {
				return fmt.Errorf("%d bundles", len(list.Items))
			}
			return nil
		})
	})
}
