package provisioner_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testmetrics"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/metrics"
)

// The operations knobs and metrics of one BundleDeployment's life: install,
// drift correction, pause (no drift correction, no pivot), resume,
// reconcile-now, failures, deletion.
func TestIntegrationOperations(t *testing.T) {
	// Not parallel: it reads the provisioner's metrics, which are
	// process-wide (every parallel test's provisioner adds to them).
	h := newHarness(t)
	ctx := context.Background()
	class := rukpakv1alpha1.ProvisionerClassPlain
	plain := map[string]string{"class": class}
	mine := map[string]string{"name": "ops"}
	value := func(name string, match ...map[string]string) float64 {
		t.Helper()
		all := map[string]string{}
		for _, m := range match {
			for k, v := range m {
				all[k] = v
			}
		}
		return testmetrics.Value(t, name, all)
	}
	cond := func(typ, status string) map[string]string {
		return map[string]string{"kind": "BundleDeployment", "name": "ops", "type": typ, "status": status}
	}
	// wantSeries waits for a condition series to read want. A reconcile
	// records the series after its status write has returned (and may
	// write the status earlier still), so the status a test waited for on
	// the API server can be there before its series are: on a loaded
	// machine, for seconds.
	wantSeries := func(t *testing.T, what string, labels map[string]string, want float64) {
		t.Helper()
		eventually(t, what+" series = "+fmt.Sprint(want), func() error {
			if got := value(metrics.NameCondition, labels); got != want {
				return fmt.Errorf("%s series = %v, want %v", what, got, want)
			}
			return nil
		})
	}
	image := map[string]string{"class": class, "source_type": "image"}
	success := map[string]string{"result": metrics.ResultSuccess}
	failure := map[string]string{"result": metrics.ResultFailure}

	files := map[string]string{"manifests/cm.yaml": configMap("ops-a", "v1") + "---\n" + configMap("ops-b", "v1")}
	contentBytes := float64(len(files["manifests/cm.yaml"]))
	applied0 := value(metrics.NameObjectsApplied, plain)
	bytes0 := value(metrics.NameUnpackedBytes, image)
	unpacks0 := value(metrics.NameUnpackDuration, image, success)
	reconciles0 := value(metrics.NameReconcileDuration, map[string]string{"controller": metrics.ControllerBundleDeployment, "class": class})

	if err := h.c.Create(ctx, newBD("ops", h.pushBundle("ops-v1", files))); err != nil {
		t.Fatal(err)
	}
	bd := h.waitBD("ops", rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "")
	active := bd.Status.ActiveBundle

	t.Run("install metrics", func(t *testing.T) {
		if got := value(metrics.NameObjectsApplied, plain) - applied0; got != 2 {
			t.Errorf("objects applied: +%v, want +2", got)
		}
		if got := value(metrics.NameUnpackedBytes, image) - bytes0; got != contentBytes {
			t.Errorf("unpacked bytes: +%v, want +%v", got, contentBytes)
		}
		if got := value(metrics.NameUnpackDuration, image, success) - unpacks0; got != 1 {
			t.Errorf("successful unpacks: +%v, want +1", got)
		}
		if got := value(metrics.NameReconcileDuration, map[string]string{"controller": metrics.ControllerBundleDeployment, "class": class}) - reconciles0; got < 1 {
			t.Errorf("bundle deployment reconciles observed: +%v, want at least 1", got)
		}
		cs := kubernetes.NewForConfigOrDie(h.env.Config)
		rels, err := driver.NewSecrets(cs.CoreV1().Secrets(namespace)).Query(map[string]string{"name": "ops", "owner": "helm", "status": "deployed"})
		if err != nil || len(rels) != 1 {
			t.Fatalf("deployed release: %v, %v", rels, err)
		}
		want := []string{"rukpak_release_objects{name=ops} 2"}
		if got := testmetrics.Series(t, metrics.NameReleaseObjects, mine); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("release objects = %v, want %v", got, want)
		}
		if got := value(metrics.NameReleaseSize, mine); got != float64(len(rels[0].Manifest)) {
			t.Errorf("release size = %v, want %d", got, len(rels[0].Manifest))
		}
		wantConds := []string{
			"rukpak_condition{kind=BundleDeployment,name=ops,status=False,type=HasValidBundle} 0",
			"rukpak_condition{kind=BundleDeployment,name=ops,status=False,type=Healthy} 0",
			"rukpak_condition{kind=BundleDeployment,name=ops,status=False,type=Installed} 0",
			"rukpak_condition{kind=BundleDeployment,name=ops,status=True,type=HasValidBundle} 1",
			"rukpak_condition{kind=BundleDeployment,name=ops,status=True,type=Healthy} 1",
			"rukpak_condition{kind=BundleDeployment,name=ops,status=True,type=Installed} 1",
			"rukpak_condition{kind=BundleDeployment,name=ops,status=Unknown,type=HasValidBundle} 0",
			"rukpak_condition{kind=BundleDeployment,name=ops,status=Unknown,type=Healthy} 0",
			"rukpak_condition{kind=BundleDeployment,name=ops,status=Unknown,type=Installed} 0",
		}
		// The condition series follow the status write (see wantSeries).
		eventually(t, "the condition series of the installed BundleDeployment", func() error {
			if got := testmetrics.Series(t, metrics.NameCondition, map[string]string{"kind": "BundleDeployment", "name": "ops"}); strings.Join(got, "\n") != strings.Join(wantConds, "\n") {
				return fmt.Errorf("condition series:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantConds, "\n"))
			}
			return nil
		})
		wantSeries(t, "Bundle "+active+" Unpacked=True", map[string]string{"kind": "Bundle", "name": active, "type": rukpakv1alpha1.TypeUnpacked, "status": "True"}, 1)
	})

	deleteCM := func(name string) {
		t.Helper()
		cm, err := h.getCM(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.c.Delete(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	waitRestored := func(name string) {
		t.Helper()
		eventually(t, name+" restored", func() error {
			_, err := h.getCM(name)
			return err
		})
	}
	drift := map[string]string{"class": class, "name": "ops"}

	t.Run("drift is corrected and counted", func(t *testing.T) {
		deleteCM("ops-a")
		waitRestored("ops-a")
		eventually(t, "drift correction counted", func() error {
			if got := value(metrics.NameDriftCorrections, drift); got != 1 {
				return fmt.Errorf("drift corrections %v, want 1", got)
			}
			return nil
		})
	})

	// request asks for a reconcile now and waits until it was handled.
	request := func(v string) *rukpakv1alpha1.BundleDeployment {
		t.Helper()
		h.updateBD("ops", func(bd *rukpakv1alpha1.BundleDeployment) {
			if bd.Annotations == nil {
				bd.Annotations = map[string]string{}
			}
			bd.Annotations[rukpakv1alpha1.AnnotationReconcileRequestedAt] = v
		})
		var bd *rukpakv1alpha1.BundleDeployment
		eventually(t, "reconcile request "+v+" handled", func() error {
			bd = h.bd("ops")
			if bd.Status.LastHandledReconcileAt != v {
				return fmt.Errorf("lastHandledReconcileAt %q", bd.Status.LastHandledReconcileAt)
			}
			return nil
		})
		return bd
	}

	t.Run("paused: no drift correction, no pivot", func(t *testing.T) {
		h.updateBD("ops", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Paused = true })
		h.waitBDExact("ops", rukpakv1alpha1.TypePaused, metav1.ConditionTrue, rukpakv1alpha1.ReasonPaused,
			"Reconciliation is paused by spec.paused: no installs, upgrades, pivots or drift correction until it is unset")
		wantSeries(t, "Paused=True", cond(rukpakv1alpha1.TypePaused, "True"), 1)

		deleteCM("ops-a")
		// A reconcile handled after the deletion: without the pause it
		// restores ops-a (as the subtest above shows).
		request("while-paused")
		if _, err := h.getCM("ops-a"); !apierrors.IsNotFound(err) {
			t.Errorf("ops-a while paused: %v, want not found", err)
		}

		v2 := h.pushBundle("ops-v2", map[string]string{"manifests/cm.yaml": configMap("ops-a", "v2")})
		h.updateBD("ops", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = v2 })
		gen := h.bd("ops").Generation
		eventually(t, "template change observed", func() error {
			if bd := h.bd("ops"); bd.Status.ObservedGeneration != gen {
				return fmt.Errorf("observedGeneration %d, want %d", bd.Status.ObservedGeneration, gen)
			}
			return nil
		})
		bd := h.bd("ops")
		if bd.Status.ActiveBundle != active {
			t.Errorf("activeBundle moved to %q while paused", bd.Status.ActiveBundle)
		}
		list := &rukpakv1alpha1.BundleList{}
		if err := h.c.List(ctx, list, client.MatchingLabels{rukpakv1alpha1.LabelOwnerName: "ops"}); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 || list.Items[0].Name != active {
			t.Errorf("bundles while paused: %d (want only %s)", len(list.Items), active)
		}
		if got := value(metrics.NameDriftCorrections, drift); got != 1 {
			t.Errorf("drift corrections while paused = %v, want 1", got)
		}
	})

	t.Run("resumed: pivots to the new template", func(t *testing.T) {
		h.updateBD("ops", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Paused = false })
		eventually(t, "pivot after resume", func() error {
			bd := h.bd("ops")
			if bd.Status.ActiveBundle == active || !conditions.Is(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue) {
				return fmt.Errorf("active %q, conditions %+v", bd.Status.ActiveBundle, bd.Status.Conditions)
			}
			if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypePaused); c != nil {
				return fmt.Errorf("still %+v", c)
			}
			return nil
		})
		if cm, err := h.getCM("ops-a"); err != nil || cm.Data["value"] != "v2" {
			t.Errorf("ops-a after resume: %v, %v", cm.Data, err)
		}
		eventually(t, "no Paused series after resume", func() error {
			if got := testmetrics.Series(t, metrics.NameCondition, cond(rukpakv1alpha1.TypePaused, "True")); len(got) != 0 {
				return fmt.Errorf("Paused series after resume: %v", got)
			}
			return nil
		})
		if got := value(metrics.NameReleaseObjects, mine); got != 1 {
			t.Errorf("release objects after the upgrade = %v, want 1", got)
		}
	})

	t.Run("reconcile now", func(t *testing.T) {
		bd := request("2026-11-22T20:00:00Z")
		if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("Installed after a requested reconcile: %+v", c)
		}
		// Drift correction happens on the request too: it is a full
		// reconcile (the deletion's own event does it as well).
		deleteCM("ops-a")
		request("2026-11-22T20:01:00Z")
		waitRestored("ops-a")
	})

	t.Run("failures", func(t *testing.T) {
		failed0 := value(metrics.NameUnpackDuration, image, failure)
		missing := h.bd("ops").Spec.Template.Spec.Source.DeepCopy()
		missing.Image.Ref = h.reg.Ref("bundles:ops-missing")
		h.updateBD("ops", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = *missing })
		h.waitBD("ops", rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnpackFailed, "ops-missing")
		eventually(t, "failed unpack counted", func() error {
			if got := value(metrics.NameUnpackDuration, image, failure) - failed0; got < 1 {
				return fmt.Errorf("failed unpacks +%v", got)
			}
			return nil
		})
		wantSeries(t, "HasValidBundle=False", cond(rukpakv1alpha1.TypeHasValidBundle, "False"), 1)

		cr := "apiVersion: nothing.example.com/v1\nkind: Nothing\nmetadata:\n  name: nothing-1\n  namespace: default\n"
		h.updateBD("ops", func(bd *rukpakv1alpha1.BundleDeployment) {
			bd.Spec.Template.Spec.Source = h.pushBundle("ops-bad", map[string]string{"manifests/n.yaml": cr})
		})
		h.waitBD("ops", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonUpgradeFailed, "required resource not found")
		eventually(t, "Installed=False series", func() error {
			if yes, no := value(metrics.NameCondition, cond(rukpakv1alpha1.TypeInstalled, "True")), value(metrics.NameCondition, cond(rukpakv1alpha1.TypeInstalled, "False")); yes != 0 || no != 1 {
				return fmt.Errorf("Installed True=%v False=%v", yes, no)
			}
			return nil
		})
	})

	t.Run("deleting removes the object's series", func(t *testing.T) {
		bundles := &rukpakv1alpha1.BundleList{}
		if err := h.c.List(ctx, bundles, client.MatchingLabels{rukpakv1alpha1.LabelOwnerName: "ops"}); err != nil {
			t.Fatal(err)
		}
		if err := h.c.Delete(ctx, h.bd("ops")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "ops gone", func() error {
			if err := h.c.Get(ctx, client.ObjectKey{Name: "ops"}, &rukpakv1alpha1.BundleDeployment{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there: %w", err)
			}
			return nil
		})
		eventually(t, "the bundle deployment's series gone", func() error {
			for _, name := range []string{metrics.NameCondition, metrics.NameReleaseSize, metrics.NameReleaseObjects, metrics.NameDriftCorrections} {
				if got := testmetrics.Series(t, name, mine); len(got) != 0 {
					return fmt.Errorf("%s: %v", name, got)
				}
			}
			return nil
		})
		eventually(t, "generated bundles' series gone", func() error {
			for _, b := range bundles.Items {
				if got := testmetrics.Series(t, metrics.NameCondition, map[string]string{"kind": "Bundle", "name": b.Name}); len(got) != 0 {
					return fmt.Errorf("bundle %s: %v", b.Name, got)
				}
			}
			return nil
		})
	})
}
