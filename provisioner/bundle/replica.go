package bundle

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/unpack"
)

// ReplicaCache keeps this replica's storage holding the content of every
// unpacked Bundle of its class, on every replica, leader or not: a Service
// in front of several replicas may send a download of status.contentURL to
// any of them. Content is unpacked again from status.resolvedSource, and
// stored archives are deterministic, so every replica serves the same bytes
// the leader stored. It never writes to the API server.
type ReplicaCache struct {
	*Reconciler
}

// Reconcile stores or deletes one Bundle's content locally.
func (c *ReplicaCache) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &rukpakv1alpha1.Bundle{}
	if err := c.Client.Get(ctx, req.NamespacedName, b); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		gone := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: req.Name}}
		return ctrl.Result{}, c.Storage.Delete(ctx, gone)
	}
	if b.Spec.ProvisionerClassName != c.Class {
		return ctrl.Result{}, nil
	}
	if !b.DeletionTimestamp.IsZero() {
		if err := c.Storage.Delete(ctx, b); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, c.forget(ctx, b)
	}
	if b.Status.ResolvedSource == nil || !conditions.Is(b.Status.Conditions, rukpakv1alpha1.TypeUnpacked, metav1.ConditionTrue) || c.stored(ctx, b) {
		return ctrl.Result{}, nil
	}

	res, err := c.Unpacker.Unpack(ctx, b)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("unpacking bundle %q for this replica: %w", b.Name, err)
	}
	defer func() { _ = res.Close() }()
	if res.State != unpack.StateUnpacked {
		return ctrl.Result{RequeueAfter: pendingRequeue}, nil
	}
	content, err := c.Handler.Handle(ctx, res.FS, b)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("bundle %q: %w", b.Name, err)
	}
	if err := c.Storage.Store(ctx, b, content); err != nil {
		return ctrl.Result{}, fmt.Errorf("storing content of bundle %q on this replica: %w", b.Name, err)
	}
	return ctrl.Result{}, nil
}

// SetupWithManager registers the cache on every replica (no leader
// election).
func (c *ReplicaCache) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("bundle-replica-cache-"+c.Class).
		For(&rukpakv1alpha1.Bundle{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			b, ok := o.(*rukpakv1alpha1.Bundle)
			return ok && b.Spec.ProvisionerClassName == c.Class
		}))).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(c)
}
