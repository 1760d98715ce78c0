package bundledeployment

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// prepare runs Prepare, if set, reporting a failure on the Installed
// condition; it returns when to look again (zero: no need).
func (r *Reconciler) prepare(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, b *rukpakv1alpha1.Bundle, objs []*unstructured.Unstructured) (time.Time, error) {
	if r.Prepare == nil {
		return time.Time{}, nil
	}
	at, err := r.Prepare(ctx, bd, objs)
	if err != nil {
		msg := fmt.Sprintf("Failed to prepare the objects of bundle %q: %v", b.Name, err)
		r.set(bd, rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInstallFailed, msg)
		r.event(bd, "Warning", rukpakv1alpha1.ReasonInstallFailed, msg)
		return time.Time{}, fmt.Errorf("preparing bundle %q: %w", b.Name, err)
	}
	return at, nil
}

// requeueBy makes res come back no later than at (when set).
func requeueBy(res ctrl.Result, at, now time.Time) ctrl.Result {
	if at.IsZero() {
		return res
	}
	// A second's margin, so the next reconcile finds the renewal due.
	wait := max(at.Sub(now)+time.Second, time.Second)
	if res.RequeueAfter == 0 || wait < res.RequeueAfter {
		res.RequeueAfter = wait
	}
	return res
}
