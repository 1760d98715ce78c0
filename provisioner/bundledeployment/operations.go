package bundledeployment

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// pausedMessage is the Paused condition's message.
const pausedMessage = "Reconciliation is paused by spec.paused: no installs, upgrades, pivots or drift correction until it is unset"

// paused reports whether bd is paused, and keeps its Paused condition in
// step: True while paused, absent otherwise. A paused BundleDeployment
// keeps its other conditions as they were last seen.
func (r *Reconciler) paused(bd *rukpakv1alpha1.BundleDeployment) bool {
	if !bd.Spec.Paused {
		meta.RemoveStatusCondition(&bd.Status.Conditions, rukpakv1alpha1.TypePaused)
		return false
	}
	r.set(bd, rukpakv1alpha1.TypePaused, metav1.ConditionTrue, rukpakv1alpha1.ReasonPaused, pausedMessage)
	return true
}

// maxRequestValue bounds the reconcile-requested-at value copied to status
// (status.lastHandledReconcileAt's schema limit).
const maxRequestValue = 256

// handledRequest records the reconcile request that a reconcile acted on.
// A value too long to record is reported rather than cut: a cut value would
// never match what the requester waits for.
func (r *Reconciler) handledRequest(bd *rukpakv1alpha1.BundleDeployment) {
	v, ok := bd.Annotations[rukpakv1alpha1.AnnotationReconcileRequestedAt]
	if !ok || v == bd.Status.LastHandledReconcileAt {
		return
	}
	if len(v) > maxRequestValue {
		r.event(bd, "Warning", "ReconcileRequestNotRecorded",
			"The value of annotation "+rukpakv1alpha1.AnnotationReconcileRequestedAt+" is longer than 256 bytes: reconciled, but not recorded in status.lastHandledReconcileAt")
		return
	}
	bd.Status.LastHandledReconcileAt = v
}

// reconcileRequested passes updates that change the reconcile-requested-at
// annotation (other metadata edits leave nothing to do).
var reconcileRequested = annotationChanged(rukpakv1alpha1.AnnotationReconcileRequestedAt)

// annotationChanged passes updates that change the value of annotation key,
// and nothing else.
func annotationChanged(key string) predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return false
			}
			return e.ObjectOld.GetAnnotations()[key] != e.ObjectNew.GetAnnotations()[key]
		},
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
