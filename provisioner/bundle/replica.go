package bundle

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/storage"
	"github.com/rukpak-dev/rukpak/unpack"
)

// ReplicaCache keeps this replica's storage holding the content of every
// unpacked Bundle of its class, on every replica, leader or not: a Service
// in front of several replicas may send a download of status.contentURL to
// any of them. Content is unpacked again from status.resolvedSource (when
// it pins the spec's source, see unpack.FetchSource), and stored archives
// are deterministic, so every replica serves the same bytes the leader
// stored; a copy that does not hash to status.contentDigest is removed
// rather than served. Fetches run in the background like the leader's. It
// never writes to the API server.
type ReplicaCache struct {
	*Reconciler

	bgOnce sync.Once
	bg     *fetches

	// resolved is the last resolved image source seen of each Bundle, so
	// the unpacker's cache of it can be dropped when the Bundle leaves
	// this process's cache without a deletion it could finalize (it moved
	// to another shard): the Bundle's status is not there to read then.
	mu       sync.Mutex
	resolved map[string]*rukpakv1alpha1.BundleSource
}

// remember records b's resolved image source (nil: nothing to drop).
func (c *ReplicaCache) remember(b *rukpakv1alpha1.Bundle) {
	src := b.Status.ResolvedSource
	c.mu.Lock()
	defer c.mu.Unlock()
	if src == nil || src.Type != rukpakv1alpha1.SourceTypeImage {
		delete(c.resolved, b.Name)
		return
	}
	if c.resolved == nil {
		c.resolved = map[string]*rukpakv1alpha1.BundleSource{}
	}
	c.resolved[b.Name] = src
}

// gone drops what this process keeps of a Bundle no longer in its cache:
// its stored content, and its cached source unless another Bundle uses it.
func (c *ReplicaCache) gone(ctx context.Context, name string) error {
	c.background().cancel(name)
	c.mu.Lock()
	src := c.resolved[name]
	delete(c.resolved, name)
	c.mu.Unlock()
	b := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Storage.Delete(ctx, b); err != nil {
		return err
	}
	b.Status.ResolvedSource = src
	return c.forget(ctx, b)
}

func (c *ReplicaCache) background() *fetches {
	c.bgOnce.Do(func() { c.bg = newFetches(c.FetchTimeout) })
	return c.bg
}

// Reconcile stores or deletes one Bundle's content locally.
func (c *ReplicaCache) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &rukpakv1alpha1.Bundle{}
	if err := c.Client.Get(ctx, req.NamespacedName, b); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, c.gone(ctx, req.Name)
	}
	if b.Spec.ProvisionerClassName != c.Class {
		return ctrl.Result{}, nil
	}
	c.remember(b)
	if !b.DeletionTimestamp.IsZero() {
		c.background().cancel(b.Name)
		if err := c.Storage.Delete(ctx, b); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, c.forget(ctx, b)
	}
	if b.Status.ResolvedSource == nil || !conditions.Is(b.Status.Conditions, rukpakv1alpha1.TypeUnpacked, metav1.ConditionTrue) || c.stored(ctx, b) {
		c.background().cancel(b.Name)
		return ctrl.Result{}, nil
	}

	res, err, done := c.background().poll(ctx, c.Unpacker, b)
	if !done {
		// Queued again when the fetch finishes, or its backoff ends.
		return ctrl.Result{RequeueAfter: c.background().retryIn(b)}, nil
	}
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
	return ctrl.Result{}, c.verify(ctx, b)
}

// verify removes this replica's copy of b unless it hashes to
// status.contentDigest: serving nothing is better than serving other bytes
// than the leader stored (the pin in status may have been rewritten since).
func (c *ReplicaCache) verify(ctx context.Context, b *rukpakv1alpha1.Bundle) error {
	d, ok := c.Storage.(storage.Digester)
	if !ok || b.Status.ContentDigest == "" {
		return nil
	}
	got, err := d.Digest(ctx, b)
	if err != nil {
		return err
	}
	if got == b.Status.ContentDigest {
		return nil
	}
	if err := c.Storage.Delete(ctx, b); err != nil {
		return fmt.Errorf("removing mismatched content of bundle %q: %w", b.Name, err)
	}
	return fmt.Errorf("content of bundle %q unpacked on this replica has digest %s, not status.contentDigest %s: not serving it", b.Name, got, b.Status.ContentDigest)
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
		WatchesRawSource(c.background().source()).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false), MaxConcurrentReconciles: c.workers()}).
		Complete(c)
}
