// Package bundledeployment holds the BundleDeployment reconciler shared by
// every provisioner class: it generates a Bundle from the template, waits for
// it to unpack, installs its objects as a Helm release, pivots from older
// Bundles, and keeps the installed objects as declared.
package bundledeployment

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/finalizer"
	"github.com/rukpak-dev/rukpak/provisioner/release"
	"github.com/rukpak-dev/rukpak/storage"
)

// ObjectsFunc turns a Bundle's stored content into the objects to install,
// applying the BundleDeployment's config. Its errors are shown to users.
type ObjectsFunc func(ctx context.Context, fsys fs.FS, bd *rukpakv1alpha1.BundleDeployment) ([]*unstructured.Unstructured, error)

// DefaultMaxBundles bounds the Bundles one BundleDeployment may have
// generated at once: the active one, the one being rolled out, and a few
// that failed to unpack and are kept for inspection.
const DefaultMaxBundles = 5

// Reconciler installs BundleDeployments of one provisioner class.
type Reconciler struct {
	Client     client.Client
	Class      string
	Loader     storage.Loader
	Objects    ObjectsFunc
	Releases   *release.Manager
	Recorder   events.EventRecorder
	MaxBundles int
	// Explain, when set, adds context to install errors caused by kinds
	// missing from the cluster (for example a bundle's declared
	// dependencies).
	Explain func(fsys fs.FS) string

	tracker *Tracker
}

// Reconcile brings one BundleDeployment's installed content in line with its
// template.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	bd := &rukpakv1alpha1.BundleDeployment{}
	if err := r.Client.Get(ctx, req.NamespacedName, bd); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if bd.Spec.ProvisionerClassName != r.Class {
		return ctrl.Result{}, nil
	}
	if !bd.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, bd)
	}
	if err := finalizer.Ensure(ctx, r.Client, bd, rukpakv1alpha1.FinalizerUninstall); err != nil {
		return ctrl.Result{}, err
	}

	before := bd.DeepCopy()
	// flush writes the status, only if it changed since the last write.
	flush := func() error {
		bd.Status.ObservedGeneration = bd.Generation
		if equality.Semantic.DeepEqual(before.Status, bd.Status) {
			return nil
		}
		if err := r.Client.Status().Patch(ctx, bd, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("updating status: %w", err)
		}
		before = bd.DeepCopy()
		return nil
	}
	res, err := r.reconcile(ctx, bd, flush)
	if uerr := flush(); uerr != nil {
		err = errors.Join(err, uerr)
	}
	return res, err
}

func (r *Reconciler) reconcile(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, flush func() error) (ctrl.Result, error) {
	b, err := r.desiredBundle(ctx, bd)
	if err != nil {
		r.set(bd, rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonCreateBundleFailed, err.Error())
		return ctrl.Result{}, err
	}

	unpacked := conditions.Get(b.Status.Conditions, rukpakv1alpha1.TypeUnpacked)
	switch {
	case b.Status.ObservedGeneration != b.Generation || unpacked == nil || unpacked.Status == metav1.ConditionUnknown ||
		(unpacked.Status == metav1.ConditionFalse && unpacked.Reason != rukpakv1alpha1.ReasonUnpackFailed):
		msg := fmt.Sprintf("Waiting for bundle %q to unpack", b.Name)
		if unpacked != nil && unpacked.Message != "" {
			msg += ": " + unpacked.Message
		}
		r.set(bd, rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionUnknown, rukpakv1alpha1.ReasonUnpackPending, msg)
		return ctrl.Result{}, nil
	case unpacked.Status == metav1.ConditionFalse:
		r.set(bd, rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnpackFailed,
			fmt.Sprintf("Failed to unpack bundle %q: %s", b.Name, unpacked.Message))
		return ctrl.Result{}, nil
	}

	fsys, err := r.Loader.Load(ctx, b)
	if err != nil {
		r.set(bd, rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonBundleLoadFailed,
			fmt.Sprintf("Failed to load content of bundle %q: %v", b.Name, err))
		return ctrl.Result{}, fmt.Errorf("loading bundle %q: %w", b.Name, err)
	}
	objs, err := r.Objects(ctx, fsys, bd)
	if err != nil {
		// Invalid content or config: nothing to retry until the object or
		// the template changes.
		r.set(bd, rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonBundleLoadFailed,
			fmt.Sprintf("Failed to load objects of bundle %q: %v", b.Name, err))
		return ctrl.Result{}, nil
	}
	r.set(bd, rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionTrue, rukpakv1alpha1.ReasonUnpackSuccessful,
		fmt.Sprintf("Successfully unpacked bundle %q", b.Name))

	stamp := ownerStamper(bd)
	result, err := r.Releases.Apply(ctx, bd.Name, objs, stamp)
	if err != nil {
		reason := rukpakv1alpha1.ReasonInstallFailed
		if result != nil && result.Upgraded {
			reason = rukpakv1alpha1.ReasonUpgradeFailed
		}
		msg := err.Error()
		if meta.IsNoMatchError(err) || strings.Contains(msg, "no matches for kind") {
			msg = "required resource not found: " + msg
			if r.Explain != nil {
				if extra := r.Explain(fsys); extra != "" {
					msg += "; " + extra
				}
			}
		}
		r.set(bd, rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, reason, msg)
		r.event(bd, "Warning", reason, msg)
		return ctrl.Result{}, fmt.Errorf("applying bundle %q: %w", b.Name, err)
	}
	if result.Changed {
		r.event(bd, "Normal", rukpakv1alpha1.ReasonInstallationSucceeded, fmt.Sprintf("Installed bundle %q (release revision %d)", b.Name, result.Release.Version))
	}
	r.set(bd, rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded,
		fmt.Sprintf("Instantiated bundle %q successfully", b.Name))
	bd.Status.ActiveBundle = b.Name

	if err := r.pivot(ctx, bd, b); err != nil {
		return ctrl.Result{}, err
	}
	if result.Changed {
		// Installed is the outcome of the apply: report it now, not after
		// the watches on newly installed kinds have synced and health is
		// known (for 1,000 objects that wait was ~0.2 s).
		if err := flush(); err != nil {
			return ctrl.Result{}, err
		}
	}

	stamped := result.Objects
	if err := r.tracker.Watch(stamped); err != nil {
		return ctrl.Result{}, err
	}
	if !result.Changed {
		if _, err := r.correctDrift(ctx, stamped); err != nil {
			return ctrl.Result{}, err
		}
	}
	return r.health(ctx, bd, stamped)
}

// healthRecheck is how often an unhealthy BundleDeployment is looked at
// even without a watch event (for example when a kind has no status).
const healthRecheck = 30 * time.Second

func (r *Reconciler) health(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, objs []*unstructured.Unstructured) (ctrl.Result, error) {
	bad, err := r.unhealthy(ctx, objs)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(bad) == 0 {
		r.set(bd, rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "All installed objects are healthy")
		return ctrl.Result{}, nil
	}
	const shown = 10
	msg := strings.Join(bad[:min(len(bad), shown)], "; ")
	if len(bad) > shown {
		msg += fmt.Sprintf("; and %d more", len(bad)-shown)
	}
	r.set(bd, rukpakv1alpha1.TypeHealthy, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnhealthy, "Unhealthy objects: "+msg)
	return ctrl.Result{RequeueAfter: healthRecheck}, nil
}

// ownerStamper labels every installed object with its BundleDeployment and
// makes the BundleDeployment its controller, so the garbage collector removes
// it too and watches map it back.
func ownerStamper(bd *rukpakv1alpha1.BundleDeployment) func(*unstructured.Unstructured) {
	ref := metav1.OwnerReference{
		APIVersion:         rukpakv1alpha1.GroupVersion.String(),
		Kind:               "BundleDeployment",
		Name:               bd.Name,
		UID:                bd.UID,
		Controller:         ptr(true),
		BlockOwnerDeletion: ptr(true),
	}
	return func(o *unstructured.Unstructured) {
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[rukpakv1alpha1.LabelOwnerKind] = "BundleDeployment"
		l[rukpakv1alpha1.LabelOwnerName] = bd.Name
		o.SetLabels(l)
		refs := []metav1.OwnerReference{ref}
		for _, existing := range o.GetOwnerReferences() {
			if existing.Controller == nil || !*existing.Controller {
				refs = append(refs, existing)
			}
		}
		o.SetOwnerReferences(refs)
	}
}

func ptr[T any](v T) *T { return &v }

// desiredBundle finds or creates the Bundle generated from bd's current
// template.
func (r *Reconciler) desiredBundle(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment) (*rukpakv1alpha1.Bundle, error) {
	hash, err := TemplateHash(bd.Spec.Template)
	if err != nil {
		return nil, err
	}
	owned, err := r.ownedBundles(ctx, bd)
	if err != nil {
		return nil, err
	}
	for i := range owned {
		if owned[i].Labels[rukpakv1alpha1.LabelBundleTemplateHash] == hash {
			return &owned[i], nil
		}
	}
	if err := r.trimBundles(ctx, bd, owned); err != nil {
		return nil, err
	}

	b := &rukpakv1alpha1.Bundle{
		ObjectMeta: metav1.ObjectMeta{
			Name:        bd.Name + "-" + hash,
			Labels:      map[string]string{},
			Annotations: map[string]string{},
		},
		Spec: *bd.Spec.Template.Spec.DeepCopy(),
	}
	// Copy, never alias, the template's maps: the BundleDeployment in the
	// cache must not change under anyone's feet.
	for k, v := range bd.Spec.Template.Metadata.Labels {
		b.Labels[k] = v
	}
	for k, v := range bd.Spec.Template.Metadata.Annotations {
		b.Annotations[k] = v
	}
	b.Labels[rukpakv1alpha1.LabelOwnerKind] = "BundleDeployment"
	b.Labels[rukpakv1alpha1.LabelOwnerName] = bd.Name
	b.Labels[rukpakv1alpha1.LabelBundleTemplateHash] = hash
	if err := controllerutil.SetControllerReference(bd, b, r.Client.Scheme()); err != nil {
		return nil, err
	}
	if err := r.Client.Create(ctx, b); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating bundle %q: %w", b.Name, err)
		}
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return nil, fmt.Errorf("reading bundle %q: %w", b.Name, err)
		}
		if !metav1.IsControlledBy(b, bd) {
			return nil, fmt.Errorf("bundle %q already exists and is not owned by bundle deployment %q", b.Name, bd.Name)
		}
	}
	r.event(bd, "Normal", "BundleCreated", fmt.Sprintf("Created bundle %q", b.Name))
	return b, nil
}

func (r *Reconciler) ownedBundles(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment) ([]rukpakv1alpha1.Bundle, error) {
	list := &rukpakv1alpha1.BundleList{}
	if err := r.Client.List(ctx, list, client.MatchingLabels{
		rukpakv1alpha1.LabelOwnerKind: "BundleDeployment",
		rukpakv1alpha1.LabelOwnerName: bd.Name,
	}); err != nil {
		return nil, fmt.Errorf("listing bundles of %q: %w", bd.Name, err)
	}
	owned := list.Items[:0]
	for _, b := range list.Items {
		if metav1.IsControlledBy(&b, bd) {
			owned = append(owned, b)
		}
	}
	return owned, nil
}

// trimBundles makes room for one more generated Bundle by deleting the
// oldest ones that are not active.
func (r *Reconciler) trimBundles(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, owned []rukpakv1alpha1.Bundle) error {
	limit := r.MaxBundles
	if limit <= 0 {
		limit = DefaultMaxBundles
	}
	if len(owned) < limit {
		return nil
	}
	sort.Slice(owned, func(i, j int) bool { return owned[i].CreationTimestamp.Before(&owned[j].CreationTimestamp) })
	excess := len(owned) - limit + 1
	for i := range owned {
		if excess == 0 {
			break
		}
		if owned[i].Name == bd.Status.ActiveBundle {
			continue
		}
		if err := r.Client.Delete(ctx, &owned[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting old bundle %q: %w", owned[i].Name, err)
		}
		r.event(bd, "Warning", rukpakv1alpha1.ReasonTooManyBundles,
			fmt.Sprintf("Deleted bundle %q: at most %d generated bundles are kept, and it is the oldest that is not active", owned[i].Name, limit))
		excess--
	}
	return nil
}

// pivot deletes every generated Bundle but the one just installed.
func (r *Reconciler) pivot(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, active *rukpakv1alpha1.Bundle) error {
	owned, err := r.ownedBundles(ctx, bd)
	if err != nil {
		return err
	}
	for i := range owned {
		if owned[i].Name == active.Name {
			continue
		}
		if err := r.Client.Delete(ctx, &owned[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting superseded bundle %q: %w", owned[i].Name, err)
		}
		r.event(bd, "Normal", "BundleSuperseded", fmt.Sprintf("Deleted bundle %q after pivoting to %q", owned[i].Name, active.Name))
	}
	return nil
}

func (r *Reconciler) finalize(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment) error {
	if !controllerutil.ContainsFinalizer(bd, rukpakv1alpha1.FinalizerUninstall) {
		return nil
	}
	if err := r.Releases.Uninstall(ctx, bd.Name); err != nil {
		return err
	}
	if left, err := r.tracker.DeleteOwned(ctx, r.Client, bd.Name); err != nil {
		return err
	} else if left > 0 {
		log.FromContext(ctx).Info("deleted objects the release uninstall left behind", "count", left)
	}
	owned, err := r.ownedBundles(ctx, bd)
	if err != nil {
		return err
	}
	for i := range owned {
		if err := r.Client.Delete(ctx, &owned[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting bundle %q: %w", owned[i].Name, err)
		}
	}
	return finalizer.Remove(ctx, r.Client, bd, rukpakv1alpha1.FinalizerUninstall)
}

func (r *Reconciler) set(bd *rukpakv1alpha1.BundleDeployment, typ string, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(&bd.Status.Conditions, bd.Generation, typ, status, reason, msg)
}

func (r *Reconciler) event(bd *rukpakv1alpha1.BundleDeployment, typ, reason, msg string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(bd, nil, typ, reason, "Reconcile", "%s", msg)
	}
}

// SetupWithManager registers the reconciler for BundleDeployments of
// r.Class, and watches the Bundles they generate and the objects they
// install.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("rukpak-" + r.Class)
	}
	tracker, err := newTracker(mgr)
	if err != nil {
		return err
	}
	r.tracker = tracker
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("bundledeployment-"+r.Class).
		For(&rukpakv1alpha1.BundleDeployment{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			bd, ok := o.(*rukpakv1alpha1.BundleDeployment)
			return ok && bd.Spec.ProvisionerClassName == r.Class
		}),
			// Status writes (the reconciler's own) and metadata edits change
			// nothing to do; spec changes and deletion bump the generation.
			// A full reconcile of a 1,000-object bundle costs ~0.2 s of CPU.
			predicate.GenerationChangedPredicate{})).
		Watches(&rukpakv1alpha1.Bundle{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return ownerRequest(context.TODO(), o)
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Build(r)
	if err != nil {
		return err
	}
	tracker.controller = c
	return nil
}
