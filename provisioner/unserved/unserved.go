// Package unserved gives a status to the Bundles and BundleDeployments
// labelled for a shard no provisioner instance serves (the shard label's
// value is a typo, or names a shard whose instance was removed): without
// it nobody reconciles them, their status stays as the last instance left
// it, and a BundleDeployment's deletion waits on its finalizer with no word
// why. The main instance runs it, knowing the shards the others serve
// (--known-shards): it writes a condition naming the label and the known
// shards, and nothing else; it installs, uninstalls and removes nothing,
// since another instance may serve a shard its list lacks.
package unserved

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/shard"
)

// Setup watches, in a cache of its own, the Bundles and BundleDeployments
// that main.Unserved(known) selects, and reports on each. main is this
// process's shard, which must be the main instance's (!core.rukpak.io/shard).
func Setup(mgr ctrl.Manager, main *shard.Shard, known []string) error {
	sel, err := main.Unserved(known)
	if err != nil {
		return fmt.Errorf("known shards: %w", err)
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:     mgr.GetScheme(),
		Mapper:     mgr.GetRESTMapper(),
		HTTPClient: mgr.GetHTTPClient(),
		ByObject: map[client.Object]cache.ByObject{
			&rukpakv1alpha1.Bundle{}:           {Label: sel},
			&rukpakv1alpha1.BundleDeployment{}: {Label: sel},
		},
		// Labels, generation, deletion and conditions are all it reads:
		// whoever labels many large objects for an unknown shard does not
		// fill this cache with their specs.
		DefaultTransform: keepMetadataAndConditions,
	})
	if err != nil {
		return fmt.Errorf("creating the cache of unserved objects: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return err
	}
	list := strings.Join(known, ", ")
	for _, k := range []struct {
		name string
		obj  client.Object
		r    *reporter
	}{
		{"unserved-bundledeployment", &rukpakv1alpha1.BundleDeployment{}, &reporter{cache: c, writer: mgr.GetClient(), known: list, deployment: true}},
		{"unserved-bundle", &rukpakv1alpha1.Bundle{}, &reporter{cache: c, writer: mgr.GetClient(), known: list}},
	} {
		if err := ctrl.NewControllerManagedBy(mgr).
			Named(k.name).
			WatchesRawSource(source.Kind(c, k.obj, &handler.TypedEnqueueRequestForObject[client.Object]{})).
			Complete(k.r); err != nil {
			return fmt.Errorf("setting up %s: %w", k.name, err)
		}
	}
	return nil
}

// reporter writes the UnknownShard condition on one kind.
type reporter struct {
	cache  client.Reader
	writer client.Client
	known  string
	// deployment: BundleDeployments (Installed), else Bundles (Unpacked).
	deployment bool
}

func (r *reporter) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var obj client.Object
	var conds *[]metav1.Condition
	typ := rukpakv1alpha1.TypeUnpacked
	if r.deployment {
		bd := &rukpakv1alpha1.BundleDeployment{}
		obj, conds, typ = bd, &bd.Status.Conditions, rukpakv1alpha1.TypeInstalled
	} else {
		b := &rukpakv1alpha1.Bundle{}
		obj, conds = b, &b.Status.Conditions
	}
	if err := r.cache.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	orig := obj.DeepCopyObject().(client.Object)
	conditions.Set(conds, obj.GetGeneration(), typ, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnknownShard,
		Message(obj.GetLabels()[shard.Label], r.known, obj.GetDeletionTimestamp() != nil))
	if equality.Semantic.DeepEqual(orig, obj) {
		return reconcile.Result{}, nil
	}
	// Optimistic: a status another writer changed meanwhile is read again.
	err := r.writer.Status().Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("writing the status of %s: %w", req.Name, err)
	}
	return reconcile.Result{}, nil
}

// Message is the condition's message for an object labelled value, known
// being the served shards.
func Message(value, known string, deleting bool) string {
	msg := fmt.Sprintf("label %s=%s names no provisioner instance (known: %s): nothing reconciles this object until the label names one of them, or is removed (then the main instance does)", shard.Label, value, known)
	if deleting {
		msg += "; its deletion waits for that"
	}
	return msg
}

// keepMetadataAndConditions drops what the reporter never reads.
func keepMetadataAndConditions(in any) (any, error) {
	switch o := in.(type) {
	case *rukpakv1alpha1.BundleDeployment:
		return &rukpakv1alpha1.BundleDeployment{
			TypeMeta:   o.TypeMeta,
			ObjectMeta: slim(o.ObjectMeta),
			Status:     rukpakv1alpha1.BundleDeploymentStatus{Conditions: o.Status.Conditions},
		}, nil
	case *rukpakv1alpha1.Bundle:
		return &rukpakv1alpha1.Bundle{
			TypeMeta:   o.TypeMeta,
			ObjectMeta: slim(o.ObjectMeta),
			Status:     rukpakv1alpha1.BundleStatus{Conditions: o.Status.Conditions},
		}, nil
	}
	return in, nil
}

func slim(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              m.Name,
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		Generation:        m.Generation,
		Labels:            map[string]string{shard.Label: m.Labels[shard.Label]},
		DeletionTimestamp: m.DeletionTimestamp,
	}
}
