package provisioner_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/shard"
	"github.com/rukpak-dev/rukpak/provisioner/unserved"
)

// TestIntegrationUnknownShard: with the main instance knowing shard1 and
// shard2 (--known-shards), a BundleDeployment and a Bundle labelled for
// shard3, which no instance serves, get Installed (Unpacked) False, reason
// UnknownShard, naming the label and the known shards; the main instance
// installs, uninstalls and removes nothing of them; a deleted
// BundleDeployment of shard3 says it waits, and is uninstalled once its
// label is removed.
func TestIntegrationUnknownShard(t *testing.T) {
	t.Parallel()
	env := testenv.Pooled(t)
	ctx := context.Background()
	testenv.MustNotError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}), "creating namespace")
	h := &harness{t: t, env: env, c: env.Client, reg: testregistry.New(t)}
	mainShard := startShard(t, env, "main", "!"+shard.Label, "shard1", "shard2")

	src := h.pushBundle("typo", map[string]string{"manifests/cm.yaml": configMap("bd-typo-cm", "v1")})
	bd := newBD("bd-typo", src)
	bd.Labels = map[string]string{shard.Label: "shard3"}
	// Left by the instance that served it before the relabelling.
	bd.Finalizers = []string{rukpakv1alpha1.FinalizerUninstall}
	testenv.MustNotError(t, h.c.Create(ctx, bd), "creating bd-typo")
	b := &rukpakv1alpha1.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "b-typo", Labels: map[string]string{shard.Label: "shard3"}},
		Spec:       rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Source: src},
	}
	testenv.MustNotError(t, h.c.Create(ctx, b), "creating b-typo")

	const known = "label core.rukpak.io/shard=shard3 names no provisioner instance (known: shard1, shard2): nothing reconciles this object until the label names one of them, or is removed (then the main instance does)"
	if got := unserved.Message("shard3", "shard1, shard2", false); got != known {
		t.Fatalf("message %q", got)
	}
	reported := h.waitBD("bd-typo", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnknownShard, known)
	if c := conditions.Get(reported.Status.Conditions, rukpakv1alpha1.TypeInstalled); c.Message != known || c.ObservedGeneration != reported.Generation {
		t.Errorf("Installed %+v, want message %q for generation %d", c, known, reported.Generation)
	}
	eventually(t, "b-typo reported", func() error {
		got := h.bundle("b-typo")
		c := conditions.Get(got.Status.Conditions, rukpakv1alpha1.TypeUnpacked)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != rukpakv1alpha1.ReasonUnknownShard || c.Message != known {
			return fmt.Errorf("Unpacked %+v", c)
		}
		return nil
	})

	t.Run("nothing is installed, unpacked or generated", func(t *testing.T) {
		if _, err := h.getCM("bd-typo-cm"); !apierrors.IsNotFound(err) {
			t.Errorf("bd-typo-cm: %v, want not found", err)
		}
		if mainShard.stores(t, b) {
			t.Error("b-typo was unpacked and stored")
		}
		list := &rukpakv1alpha1.BundleList{}
		testenv.MustNotError(t, h.c.List(ctx, list, client.MatchingLabels{rukpakv1alpha1.LabelOwnerName: "bd-typo"}), "listing bundles")
		if len(list.Items) != 0 {
			t.Errorf("%d bundles generated for bd-typo", len(list.Items))
		}
	})

	t.Run("a deletion waits and says so", func(t *testing.T) {
		testenv.MustNotError(t, h.c.Delete(ctx, h.bd("bd-typo")), "deleting bd-typo")
		got := h.waitBD("bd-typo", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnknownShard,
			known+"; its deletion waits for that")
		if c := conditions.Get(got.Status.Conditions, rukpakv1alpha1.TypeInstalled); c.Message != known+"; its deletion waits for that" {
			t.Errorf("Installed message %q", c.Message)
		}
		if len(got.Finalizers) != 1 || got.Finalizers[0] != rukpakv1alpha1.FinalizerUninstall {
			t.Errorf("finalizers %v: the reporter removed something", got.Finalizers)
		}
	})

	t.Run("the label removed, the main instance finishes the deletion", func(t *testing.T) {
		h.updateBD("bd-typo", func(bd *rukpakv1alpha1.BundleDeployment) { delete(bd.Labels, shard.Label) })
		eventually(t, "bd-typo gone", func() error {
			err := h.c.Get(ctx, client.ObjectKey{Name: "bd-typo"}, &rukpakv1alpha1.BundleDeployment{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("reading bd-typo: %w", err)
			}
			return errors.New("still there")
		})
	})
}
