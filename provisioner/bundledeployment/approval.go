package bundledeployment

import (
	"context"
	"fmt"
	"io/fs"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
)

// The approval gate (spec.upgradeApproval: Manual): the first install
// proceeds; a later pivot to the Bundle of a new template waits until the
// annotation core.rukpak.io/approved-bundle names that Bundle. While it
// waits, the reconcile installs the active Bundle instead, so its objects
// stay as declared (drift correction, health) and the pending Bundle is
// kept (no pivot deletes it). The same path keeps the active Bundle
// installed while the Bundle of a new template cannot be installed yet
// (keepActive): still unpacking, failed to unpack, or invalid objects.

// reasonPivotApproved is the event reason of a pivot that proceeds after
// its approval.
const reasonPivotApproved = "PivotApproved"

// previewObjects bounds the objects of each kind of change the PivotPending
// message names; maxPreviewMessage bounds the whole message, well under
// the condition's 32 KiB.
const (
	previewObjects    = 10
	maxPreviewMessage = 8 << 10
)

// heldPivot is what a reconcile installs while a pivot waits: the active
// Bundle, its content and objects.
type heldPivot struct {
	bundle *rukpakv1alpha1.Bundle
	fsys   fs.FS
	objs   []*unstructured.Unstructured
}

// holdPivot decides whether installing b (the Bundle of the current
// template, unpacked; objs are its objects) waits for approval. If it
// does, the PivotPending condition and status.pendingBundle say so, with a
// preview of the pivot, and the active Bundle is returned to install in
// its place. nil means go ahead with b.
func (r *Reconciler) holdPivot(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, b *rukpakv1alpha1.Bundle, objs []*unstructured.Unstructured) (*heldPivot, error) {
	active := bd.Status.ActiveBundle
	approved := bd.Annotations[rukpakv1alpha1.AnnotationApprovedBundle] == b.Name
	if bd.Spec.UpgradeApproval != rukpakv1alpha1.UpgradeApprovalManual || active == "" || active == b.Name || approved {
		if bd.Status.PendingBundle == b.Name && approved {
			r.event(bd, "Normal", reasonPivotApproved, fmt.Sprintf("Pivot from bundle %q to bundle %q approved by annotation %s", active, b.Name, rukpakv1alpha1.AnnotationApprovedBundle))
		}
		bd.Status.PendingBundle = ""
		meta.RemoveStatusCondition(&bd.Status.Conditions, rukpakv1alpha1.TypePivotPending)
		return nil, nil
	}

	if r.previewStale(bd, b) {
		msg := fmt.Sprintf("Pivot from bundle %q to bundle %q awaits approval: set annotation %s=%s to proceed. Preview (server-side dry run): %s",
			active, b.Name, rukpakv1alpha1.AnnotationApprovedBundle, b.Name, r.preview(ctx, bd, b, objs))
		if len(msg) > maxPreviewMessage {
			msg = strings.ToValidUTF8(msg[:maxPreviewMessage-3], "") + "..."
		}
		if bd.Status.PendingBundle != b.Name {
			r.event(bd, "Normal", rukpakv1alpha1.ReasonAwaitingApproval, msg)
		}
		bd.Status.PendingBundle = b.Name
		r.set(bd, rukpakv1alpha1.TypePivotPending, metav1.ConditionTrue, rukpakv1alpha1.ReasonAwaitingApproval, msg)
	}

	held, err := r.loadActive(ctx, bd, active)
	if err != nil {
		return nil, fmt.Errorf("pivot to bundle %q awaits approval, and the active bundle cannot be kept installed meanwhile: %w", b.Name, err)
	}
	return held, nil
}

// keepActive returns the active Bundle to install in place of b, the
// Bundle of the current template, which cannot be installed (yet); nil
// when b is the active one or nothing is installed.
func (r *Reconciler) keepActive(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, b *rukpakv1alpha1.Bundle) (*heldPivot, error) {
	active := bd.Status.ActiveBundle
	if active == "" || active == b.Name {
		return nil, nil
	}
	held, err := r.loadActive(ctx, bd, active)
	if err != nil {
		return nil, fmt.Errorf("bundle %q cannot be installed, and the active bundle cannot be kept installed meanwhile: %w", b.Name, err)
	}
	return held, nil
}

// previewStale says whether the PivotPending preview must be computed
// (again): for a new target, a new generation (spec.config may have
// changed what the pivot installs), or on a reconcile request (the
// cluster may have changed since).
func (r *Reconciler) previewStale(bd *rukpakv1alpha1.BundleDeployment, b *rukpakv1alpha1.Bundle) bool {
	c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypePivotPending)
	if c == nil || bd.Status.PendingBundle != b.Name || c.ObservedGeneration != bd.Generation || strings.Contains(c.Message, previewPending) {
		return true
	}
	v, ok := bd.Annotations[rukpakv1alpha1.AnnotationReconcileRequestedAt]
	return ok && v != bd.Status.LastHandledReconcileAt
}

// previewPending starts a preview whose render goes on in the background:
// computed again at the next reconcile (the render's end triggers one).
const previewPending = "pending, computed once rendered: "

// preview is the pivot's plan in one line, or why there is none.
func (r *Reconciler) preview(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, b *rukpakv1alpha1.Bundle, objs []*unstructured.Unstructured) string {
	if ri, ok := r.installer().(RenderingInstaller); ok && r.Objects == nil {
		fsys, err := r.Loader.Load(ctx, b)
		if err != nil {
			return fmt.Sprintf("failed: loading bundle %q: %v", b.Name, err)
		}
		if ri, ok = r.renderer(bd, ri); !ok {
			return "not available: the provisioner may not install this bundle deployment (see Installed)"
		}
		p, err := PlanRender(ctx, r.Releases, ri, bd, fsys)
		if pe, ok := pending(err); ok {
			return previewPending + pe.Message
		}
		if err != nil {
			return "failed: " + err.Error()
		}
		return p.Summary(previewObjects)
	}
	if r.Objects == nil {
		return fmt.Sprintf("not available for provisioner class %s (its objects are rendered at install time)", r.Class)
	}
	if r.Prepare != nil {
		// Serving certificates and CA bundles as the install would fill
		// them in (read from the cluster, nothing written): without them
		// every caBundle would show as a change.
		objs = deepCopyAll(objs)
		if _, err := r.Prepare(ctx, bd, objs); err != nil {
			return "failed: " + err.Error()
		}
	}
	p, err := PlanPivot(ctx, r.Releases, bd, objs)
	if err != nil {
		return "failed: " + err.Error()
	}
	return p.Summary(previewObjects)
}

// loadActive reads the active Bundle's content and objects, to install in
// place of a pivot that waits.
func (r *Reconciler) loadActive(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, name string) (*heldPivot, error) {
	b := &rukpakv1alpha1.Bundle{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, b); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("active bundle %q no longer exists", name)
		}
		return nil, fmt.Errorf("reading active bundle %q: %w", name, err)
	}
	if !created(bd, b) {
		return nil, fmt.Errorf("active bundle %q was not created by this bundle deployment", name)
	}
	fsys, objs, err, objErr := r.decode(ctx, bd, b)
	if err != nil {
		return nil, fmt.Errorf("loading active bundle %q: %w", name, err)
	}
	if objErr == nil && r.Settle != nil {
		objs, objErr = r.Settle(ctx, bd, objs)
	}
	if objErr != nil {
		return nil, fmt.Errorf("loading objects of active bundle %q: %w", name, objErr)
	}
	if err := placeObjects(objs, bd); err != nil {
		return nil, err
	}
	return &heldPivot{bundle: b, fsys: fsys, objs: objs}, nil
}

// reasonConfigApproved is the event reason of a spec.config change that
// proceeds after its approval.
const reasonConfigApproved = "ConfigApproved"

// holdConfig decides whether installing b (the Bundle installed now, with
// objs) waits for the approval of a spec.config change: in Manual mode,
// when b is the active Bundle and spec.config differs from the one the
// release was installed with (status.installedConfig). A values change
// can alter a release as much as a pivot; a pivot approved with a changed
// config installs with it, its preview having shown it. While it waits,
// the ConfigPending condition and status.pendingConfig name it
// (<bundle>/config-<fingerprint>), with a preview, and nothing is
// installed: the old config is not kept, so the release is left as it is
// (no drift correction) until the change is approved or reverted.
func (r *Reconciler) holdConfig(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, b *rukpakv1alpha1.Bundle, objs []*unstructured.Unstructured) bool {
	h := ConfigHash(bd.Spec.Config)
	token := b.Name + "/config-" + h
	approved := bd.Annotations[rukpakv1alpha1.AnnotationApprovedBundle] == token
	installed := bd.Status.InstalledConfig
	if bd.Spec.UpgradeApproval != rukpakv1alpha1.UpgradeApprovalManual || b.Name != bd.Status.ActiveBundle || installed == "" || installed == h || approved {
		if bd.Status.PendingConfig == token && approved {
			r.event(bd, "Normal", reasonConfigApproved, fmt.Sprintf("Change of spec.config of bundle %q approved by annotation %s", b.Name, rukpakv1alpha1.AnnotationApprovedBundle))
		}
		bd.Status.PendingConfig = ""
		meta.RemoveStatusCondition(&bd.Status.Conditions, rukpakv1alpha1.TypeConfigPending)
		return false
	}
	c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeConfigPending)
	v, requested := bd.Annotations[rukpakv1alpha1.AnnotationReconcileRequestedAt]
	if c == nil || bd.Status.PendingConfig != token || c.ObservedGeneration != bd.Generation || (requested && v != bd.Status.LastHandledReconcileAt) {
		msg := fmt.Sprintf("Change of spec.config of bundle %q awaits approval: set annotation %s=%s to proceed (until then nothing is installed or corrected). Preview (server-side dry run): %s",
			b.Name, rukpakv1alpha1.AnnotationApprovedBundle, token, r.preview(ctx, bd, b, objs))
		if len(msg) > maxPreviewMessage {
			msg = strings.ToValidUTF8(msg[:maxPreviewMessage-3], "") + "..."
		}
		if bd.Status.PendingConfig != token {
			r.event(bd, "Normal", rukpakv1alpha1.ReasonAwaitingApproval, msg)
		}
		bd.Status.PendingConfig = token
		r.set(bd, rukpakv1alpha1.TypeConfigPending, metav1.ConditionTrue, rukpakv1alpha1.ReasonAwaitingApproval, msg)
	}
	return true
}

// approvalChanged lets a change of the approval annotation through the
// generation filter: it may release a waiting pivot.
var approvalChanged = annotationChanged(rukpakv1alpha1.AnnotationApprovedBundle)

func deepCopyAll(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopy()
	}
	return out
}
