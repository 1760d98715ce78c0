package bundledeployment

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// Moving a BundleDeployment between shards (relabelling it) hands it over
// whole: the shard it leaves drops it from its cache, forgets what it
// remembered of it and deletes its copies of the Bundles' content; the
// shard it joins relabels the Bundles it generated (recorded by UID in its
// status) to its own labels, stores their content again from
// status.resolvedSource, points their status.contentURL at itself, and
// adopts the release (records live in the namespace all shards share), so
// nothing installed is applied again.

// adoptRecheck is how soon a BundleDeployment whose Bundles were just
// relabelled is looked at again if their arrival in this shard's cache
// does not queue it first.
const adoptRecheck = 5 * time.Second

// adopt relabels bd's recorded Bundles whose shard labels differ from
// bd's, so they are reconciled (unpacked, stored, served) by bd's shard.
// Those outside this shard's cache are read from the API server; a
// recorded Bundle the API server does not have is gone, and its record is
// dropped. It reports whether it relabelled any: their arrival in this
// shard's cache queues bd again.
func (r *Reconciler) adopt(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment) (bool, error) {
	if r.Shard == nil {
		return false, nil
	}
	moved := false
	for _, g := range slices.Clone(bd.Status.GeneratedBundles) {
		if g.UID == "" {
			// An intent: desiredBundle decides whose Bundle it is.
			continue
		}
		key := client.ObjectKey{Name: g.Name}
		b := &rukpakv1alpha1.Bundle{}
		err := r.Client.Get(ctx, key, b)
		if apierrors.IsNotFound(err) && r.BundleReader != nil {
			if err = r.BundleReader.Get(ctx, key, b); apierrors.IsNotFound(err) {
				// The API server says so, not a cache that lags.
				r.forget(bd, g.Name)
				continue
			}
		}
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return false, fmt.Errorf("reading bundle %q: %w", g.Name, err)
		case b.UID != g.UID || !r.Shard.Differs(bd.Labels, b.Labels):
			// Someone else's Bundle now (refused later), or already here.
			continue
		}
		before := b.DeepCopy()
		if b.Labels == nil {
			b.Labels = map[string]string{}
		}
		r.Shard.Stamp(bd.Labels, b.Labels)
		// The resourceVersion as a precondition: a Bundle someone replaced
		// since the read is not relabelled.
		if err := r.Client.Patch(ctx, b, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return false, fmt.Errorf("moving bundle %q to the shard of its bundle deployment: %w", g.Name, err)
		}
		r.event(bd, "Normal", "BundleMoved", fmt.Sprintf("Moved bundle %q to this bundle deployment's shard (labels %s)", g.Name, shardLabels(r.Shard.Keys(), bd.Labels)))
		moved = true
	}
	return moved, nil
}

// shardLabels shows bd's values of keys, "-" for one it lacks.
func shardLabels(keys []string, l map[string]string) string {
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += ","
		}
		v, ok := l[k]
		if !ok {
			v = "-"
		}
		out += k + "=" + v
	}
	return out
}

// forgetOnMove drops what this process remembers of a BundleDeployment
// when it enters or leaves this process's cache (created, deleted, or
// relabelled into or out of this shard): records and verdicts kept from an
// earlier stay would hide what another shard did meanwhile (Bundles it
// generated would look foreign). It runs as a predicate, before the
// request is queued, so no reconcile sees the stale memory; it filters
// nothing.
func (r *Reconciler) forgetOnMove() predicate.Predicate {
	forget := func(o client.Object) bool {
		r.records.dropUID(o.GetUID())
		if r.tracker != nil {
			r.tracker.Forget(o.GetName())
		}
		r.settled.forget(o.GetName())
		return true
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return forget(e.Object) },
		DeleteFunc: func(e event.DeleteEvent) bool { return forget(e.Object) },
	}
}
