package bundledeployment

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/crdupgrade"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// maxOffenderEvents bounds the events naming offending objects one failed
// preflight emits (one event per object: events of one reason and action
// about one object are merged into a series that keeps only the first
// note, so each names its object as the related one).
const maxOffenderEvents = 100

// preflight runs the CRD upgrade preflight on objs, the new Bundle's
// objects, and reports whether they may be applied. When they may not, the
// Installed condition says why and the active Bundle stays as it is: its
// objects are left installed and it is not deleted.
//
// digests are the bundle CRDs' digests, by name, for preflightPassed.
func (r *Reconciler) preflight(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, b *rukpakv1alpha1.Bundle, objs []*unstructured.Unstructured) (ok bool, digests map[string][32]byte, err error) {
	if r.Preflight == nil || bd.Annotations[rukpakv1alpha1.AnnotationSkipCRDUpgradePreflight] == "true" {
		return true, nil, nil
	}
	opts := crdupgrade.RunOptions{Digests: map[string][32]byte{}}
	if r.tracker != nil {
		// The live CRDs' versions from the cache of installed objects'
		// metadata (a GET each on every reconcile otherwise), and the
		// CRDs no remembered pass covers (after a restart, all of them)
		// checked with one LIST rather than read whole one by one.
		opts.Metadata = r.tracker.cache
		opts.Same = func(ctx context.Context, crds []*unstructured.Unstructured) (map[string]string, error) {
			return r.tracker.sameAsLive(ctx, bd.Name, crds)
		}
	}
	reports, err := r.Preflight.RunWith(ctx, objs, opts)
	if crdupgrade.IsBudget(err) {
		// The objects are more than the preflight may read: as failing as a
		// broken object, and looked at again as one is.
		msg := fmt.Sprintf("CRD upgrade preflight for bundle %q could not finish within its bounds: %v. Bundle %q was not installed", b.Name, err, b.Name)
		if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled); c == nil || c.Message != msg {
			r.event(bd, "Warning", rukpakv1alpha1.ReasonUpgradePreflightFailed, msg)
		}
		r.set(bd, rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonUpgradePreflightFailed, msg)
		return false, nil, nil
	}
	if err != nil {
		r.set(bd, rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonUpgradePreflightFailed,
			fmt.Sprintf("CRD upgrade preflight for bundle %q could not run: %v", b.Name, err))
		return false, nil, fmt.Errorf("CRD upgrade preflight for bundle %q: %w", b.Name, err)
	}
	msg := crdupgrade.Message(reports)
	if msg == "" {
		return true, opts.Digests, nil
	}
	msg += fmt.Sprintf(". Bundle %q was not installed", b.Name)
	if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled); c == nil || c.Message != msg {
		r.offenderEvents(bd, reports, msg)
	}
	r.set(bd, rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonUpgradePreflightFailed, msg)
	return false, nil, nil
}

// preflightPassed lets the next preflight of crds (the Bundle's CRDs, as
// preflight was given them, whose digests it returned: they are stamped
// by the install since) pass without reading them: those result
// applied as they are (no field dropped) and read Established, unchanged
// since, are the live CRDs at that version. Without it, the first
// reconcile after an install read every CRD of it back.
func (r *Reconciler) preflightPassed(crds []*unstructured.Unstructured, digests map[string][32]byte, result *release.Result) {
	if r.Preflight == nil || result == nil {
		return
	}
	for _, crd := range crds {
		digest, ok := digests[crd.GetName()]
		if !ok || !isCRD(crd.GroupVersionKind()) {
			continue
		}
		applied := clusterScoped(crd)
		at, ok := result.AppliedAt(applied)
		if !ok || at.Established == "" || droppedFrom(result, applied) {
			continue
		}
		r.Preflight.Passed(crd.GetName(), at.Established, digest)
	}
}

// droppedFrom says whether result applied o without some of its fields.
func droppedFrom(result *release.Result, o *unstructured.Unstructured) bool {
	for _, d := range result.Dropped {
		if d.Ref.Kind == o.GetKind() && d.Ref.Namespace == o.GetNamespace() && d.Ref.Name == o.GetName() {
			return true
		}
	}
	return false
}

// offenderEvents records the preflight's verdict once, then one event per
// offending object (the full list, up to maxOffenderEvents), related to
// that object so `kubectl events` shows each.
func (r *Reconciler) offenderEvents(bd *rukpakv1alpha1.BundleDeployment, reports []*crdupgrade.Report, msg string) {
	offenders, unlisted := crdupgrade.Offenders(reports, maxOffenderEvents)
	summary := fmt.Sprintf("%d offending objects in related events", len(offenders))
	if unlisted > 0 {
		summary += fmt.Sprintf(", %d more not listed", unlisted)
	}
	r.event(bd, "Warning", rukpakv1alpha1.ReasonUpgradePreflightFailed, summary+": "+msg)
	if r.Recorder == nil {
		return
	}
	for _, o := range offenders {
		related := &unstructured.Unstructured{}
		related.SetAPIVersion(o.APIVersion)
		related.SetKind(o.Kind)
		related.SetNamespace(o.Object.Namespace)
		related.SetName(o.Object.Name)
		note := fmt.Sprintf("CRD %s upgrade would break %s: %s", o.CRD, o.Object, strings.Join(o.Findings, "; "))
		if len(note) > maxNote {
			note = strings.ToValidUTF8(note[:maxNote-3], "") + "..."
		}
		r.Recorder.Eventf(bd, related, "Warning", rukpakv1alpha1.ReasonUpgradePreflightFailed, "CheckCRDUpgrade", "%s", note)
	}
}

// skipPreflightChanged lets a change of the opt-out annotation through the
// generation filter: it changes what a reconcile does.
var skipPreflightChanged = annotationChanged(rukpakv1alpha1.AnnotationSkipCRDUpgradePreflight)
