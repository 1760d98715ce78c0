// Package finalizer adds and removes a reconciler's finalizer with a merge
// patch, so a reconcile never overwrites fields it did not read.
package finalizer

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Ensure adds name to obj's finalizers if it is missing.
func Ensure(ctx context.Context, c client.Client, obj client.Object, name string) error {
	if controllerutil.ContainsFinalizer(obj, name) {
		return nil
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	controllerutil.AddFinalizer(obj, name)
	if err := c.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("adding finalizer %s: %w", name, err)
	}
	return nil
}

// Remove drops name from obj's finalizers; an object already gone is fine.
func Remove(ctx context.Context, c client.Client, obj client.Object, name string) error {
	if !controllerutil.ContainsFinalizer(obj, name) {
		return nil
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	controllerutil.RemoveFinalizer(obj, name)
	if err := c.Patch(ctx, obj, patch); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("removing finalizer %s: %w", name, err))
	}
	return nil
}
