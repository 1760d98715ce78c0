package bundledeployment

import (
	"context"
	"fmt"
	"io/fs"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
)

// content reads b's content and objects once b has unpacked, and says on
// HasValidBundle whether b can be installed. ready is false while b
// unpacks, after its unpack failed and when its objects are invalid; err
// is set only when loading may succeed on a retry.
func (r *Reconciler) content(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, b *rukpakv1alpha1.Bundle) (fsys fs.FS, objs []*unstructured.Unstructured, ready bool, err error) {
	unpacked := conditions.Get(b.Status.Conditions, rukpakv1alpha1.TypeUnpacked)
	switch {
	case r.notReported(b):
		// Its report queues bd again within a second: say nothing until
		// then (writes.go).
		r.warm()
		return nil, nil, false, nil
	case b.Status.ObservedGeneration != b.Generation || unpacked == nil || unpacked.Status == metav1.ConditionUnknown ||
		(unpacked.Status == metav1.ConditionFalse && unpacked.Reason != rukpakv1alpha1.ReasonUnpackFailed):
		// RukPak's words, then what the Bundle says it is doing.
		msg := fmt.Sprintf("Waiting for the %s Bundle to be unpacked", b.Name)
		if unpacked != nil && unpacked.Message != "" {
			msg += ": " + unpacked.Message
		}
		r.set(bd, rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionUnknown, rukpakv1alpha1.ReasonUnpackPending, msg)
		r.warm()
		return nil, nil, false, nil
	case unpacked.Status == metav1.ConditionFalse:
		r.set(bd, rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnpackFailed,
			fmt.Sprintf("Failed to unpack the %s Bundle: %s", b.Name, unpacked.Message))
		return nil, nil, false, nil
	}

	fsys, objs, err, objErr := r.decode(ctx, bd, b)
	if err != nil {
		if at, ok := r.storedElsewhere(ctx, b); ok {
			// Moved here from another shard, whose copy is no longer
			// served: this shard stores it again, and the Bundle's status
			// (its new contentURL) brings bd back.
			r.set(bd, rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionUnknown, rukpakv1alpha1.ReasonUnpackPending,
				fmt.Sprintf("Waiting for bundle %q to be stored by this provisioner: its content was stored at %s", b.Name, at))
			return nil, nil, false, nil
		}
		r.set(bd, rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonBundleLoadFailed,
			fmt.Sprintf("Failed to load content of bundle %q: %v", b.Name, err))
		return nil, nil, false, fmt.Errorf("loading bundle %q: %w", b.Name, err)
	}
	err = objErr
	if err == nil && r.Settle != nil {
		objs, err = r.Settle(ctx, bd, objs)
	}
	if err == nil {
		err = placeObjects(objs, bd)
	}
	if err != nil {
		// Invalid content or config: nothing to retry until the object or
		// the template changes.
		r.set(bd, rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonBundleLoadFailed,
			fmt.Sprintf("Failed to load objects of bundle %q: %v", b.Name, err))
		return nil, nil, false, nil
	}
	r.set(bd, rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionTrue, rukpakv1alpha1.ReasonUnpackSuccessful,
		fmt.Sprintf("Successfully unpacked the %s Bundle", b.Name))
	return fsys, objs, true, nil
}

// storedElsewhere reports, on a shard, where b's content was stored when
// that is not this process's content service: b moved here from another
// shard. status.contentURL is anyone's with bundles/status to write, so it
// only ever turns a load failure into a wait, and never points a download
// anywhere; unsharded, a contentURL not this process's is a forgery, and
// the load failure is reported as such.
func (r *Reconciler) storedElsewhere(ctx context.Context, b *rukpakv1alpha1.Bundle) (string, bool) {
	if r.Shard == nil || r.ContentURL == nil || b.Status.ContentURL == "" {
		return "", false
	}
	ours, err := r.ContentURL(ctx, b)
	if err != nil || ours == b.Status.ContentURL {
		return "", false
	}
	return b.Status.ContentURL, true
}

// WarmingInstaller is an Installer that gets ready for an install it
// expects: the helm class starts the process that will render the chart
// while the Bundle unpacks (helm.Warm).
type WarmingInstaller interface {
	Installer
	Warm()
}

// warm readies the installer for b's install, about to come once b has
// unpacked.
func (r *Reconciler) warm() {
	if w, ok := r.installer().(WarmingInstaller); ok {
		w.Warm()
	}
}
