// Package bundle holds the Bundle reconciler shared by every provisioner
// class: it unpacks a Bundle's source, lets the class's format handler
// validate (and possibly convert) the content, stores it and reports where it
// can be downloaded.
package bundle

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/statuspatch"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/finalizer"
	"github.com/rukpak-dev/rukpak/provisioner/metrics"
	"github.com/rukpak-dev/rukpak/storage"
	"github.com/rukpak-dev/rukpak/unpack"
)

// Handler validates unpacked content for a bundle format and returns the
// content to store (the same filesystem, or a converted one). Its errors are
// shown to users on the Bundle's Unpacked condition.
type Handler interface {
	Handle(ctx context.Context, fsys fs.FS, bundle *rukpakv1alpha1.Bundle) (fs.FS, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, fsys fs.FS, bundle *rukpakv1alpha1.Bundle) (fs.FS, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, fsys fs.FS, b *rukpakv1alpha1.Bundle) (fs.FS, error) {
	return f(ctx, fsys, b)
}

// pendingRequeue is how often a Bundle whose source is not available yet
// (for example a ConfigMap not created yet) is looked at again.
const pendingRequeue = 15 * time.Second

// defaultWorkers is how many Bundles of one class reconcile at once. Fetches
// do not hold a worker (see fetches); workers validate and store content.
const defaultWorkers = 4

// Reconciler unpacks Bundles of one provisioner class.
type Reconciler struct {
	Client   client.Client
	Class    string
	Unpacker unpack.Unpacker
	Storage  storage.Storage
	Handler  Handler
	Recorder events.EventRecorder
	// FetchTimeout bounds one unpack of a Bundle's source (default
	// unpack.DefaultLimits.FetchTimeout).
	FetchTimeout time.Duration
	// Workers is the number of Bundles reconciled at once (default 4).
	Workers int
	// UnpackingGrace is how long a fetch runs before its Bundle is shown
	// Unpacking (default defaultUnpackingGrace).
	UnpackingGrace time.Duration
	// Stored, if set, is given the content just stored for b and the
	// SHA-256 of its archive (with a Storage that says it,
	// storage.HashingStorer), before b's status says it is unpacked: what
	// the handler made of the content may spare its installs the work of
	// reading it back.
	Stored func(ctx context.Context, b *rukpakv1alpha1.Bundle, content fs.FS, sum [sha256.Size]byte)

	bgOnce sync.Once
	bg     *fetches
}

// background returns the reconciler's fetches, made on first use.
func (r *Reconciler) background() *fetches {
	r.bgOnce.Do(func() {
		r.bg = newFetches(r.FetchTimeout)
		r.bg.observe = r.observeUnpack
	})
	return r.bg
}

func (r *Reconciler) workers() int {
	if r.Workers > 0 {
		return r.Workers
	}
	return defaultWorkers
}

// Reconcile brings one Bundle's status in line with its stored content.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &rukpakv1alpha1.Bundle{}
	if err := r.Client.Get(ctx, req.NamespacedName, b); err != nil {
		if apierrors.IsNotFound(err) {
			r.background().cancel(req.Name)
			metrics.Forget(kind, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if b.Spec.ProvisionerClassName != r.Class {
		return ctrl.Result{}, nil
	}
	defer metrics.ObserveReconcile(metrics.ControllerBundle, r.Class, time.Now())

	if !b.DeletionTimestamp.IsZero() {
		// A fetch that never finishes must not keep the Bundle.
		r.background().cancel(b.Name)
		return ctrl.Result{}, r.finalize(ctx, b)
	}
	// Every reconcile, not only status writes: a restarted process shows
	// the conditions of Bundles it has nothing to do for.
	defer func() { metrics.RecordConditions(kind, b.Name, b.Status.Conditions) }()
	if err := finalizer.Ensure(ctx, r.Client, b, rukpakv1alpha1.FinalizerDeleteCachedBundle); err != nil {
		return ctrl.Result{}, err
	}

	if r.upToDate(ctx, b) {
		r.background().cancel(b.Name)
		return ctrl.Result{}, r.recordStored(ctx, b)
	}

	before := b.DeepCopy()
	res, err := r.unpack(ctx, b)
	if uerr := r.updateStatus(ctx, before, b); uerr != nil {
		return ctrl.Result{}, errors.Join(err, uerr)
	}
	if err != nil && unpack.IsTerminal(err) {
		// Retrying cannot help until the Bundle (or what it references)
		// changes; the status says why.
		log.FromContext(ctx).Info("unpack failed", "error", err.Error())
		return ctrl.Result{}, nil
	}
	return res, err
}

// upToDate is true when the Bundle's current generation is unpacked and its
// content is still in storage (it may be gone after a restart with an
// emptyDir; then it is unpacked again from status.resolvedSource).
func (r *Reconciler) upToDate(ctx context.Context, b *rukpakv1alpha1.Bundle) bool {
	if b.Status.ObservedGeneration != b.Generation || !conditions.Is(b.Status.Conditions, rukpakv1alpha1.TypeUnpacked, metav1.ConditionTrue) {
		return false
	}
	return r.stored(ctx, b)
}

// stored reports whether b's content is in this process's storage.
func (r *Reconciler) stored(ctx context.Context, b *rukpakv1alpha1.Bundle) bool {
	found, err := r.Storage.Exists(ctx, b)
	return err == nil && found
}

// recordStored fills in status.contentDigest of a Bundle stored before
// digests were recorded, and points status.contentURL at this process's
// content service if it points elsewhere: the content service's URL
// changed, or the Bundle moved here from another shard (whose last status
// write may land after this shard's).
func (r *Reconciler) recordStored(ctx context.Context, b *rukpakv1alpha1.Bundle) error {
	before := b.DeepCopy()
	if d, ok := r.Storage.(storage.Digester); ok && b.Status.ContentDigest == "" {
		digest, err := d.Digest(ctx, b)
		if err != nil {
			return err
		}
		b.Status.ContentDigest = digest
	}
	url, err := r.Storage.URLFor(ctx, b)
	if err != nil {
		return fmt.Errorf("content URL of bundle %q: %w", b.Name, err)
	}
	b.Status.ContentURL = url
	return r.updateStatus(ctx, before, b)
}

const defaultUnpackingGrace = time.Second

func (r *Reconciler) unpackingGrace() time.Duration {
	if r.UnpackingGrace > 0 {
		return r.UnpackingGrace
	}
	return defaultUnpackingGrace
}

func (r *Reconciler) unpack(ctx context.Context, b *rukpakv1alpha1.Bundle) (ctrl.Result, error) {
	res, err, done := r.background().poll(ctx, r.Unpacker, b)
	if !done {
		if wait := r.background().retryIn(b); wait > 0 {
			// The failure stays on display until the retry's outcome.
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		// Most fetches finish well within the grace: their Bundle goes
		// straight to Unpacked, one status write (and one reconcile of its
		// BundleDeployment) fewer per Bundle. A slower one is shown
		// Unpacking once the grace has passed.
		if grace, age := r.unpackingGrace(), r.background().age(b.Name); age < grace {
			return ctrl.Result{RequeueAfter: grace - age}, nil
		}
		// Queued again when the fetch finishes. A failure being retried
		// stays on display until the retry has an outcome, and so does
		// Unpacked while pinned content is unpacked again after storage was
		// lost (a restart with an emptyDir): installs keep working meanwhile.
		if b.Status.ObservedGeneration != b.Generation || (b.Status.Phase != rukpakv1alpha1.PhaseFailing && b.Status.Phase != rukpakv1alpha1.PhaseUnpacked) {
			setPhase(b, rukpakv1alpha1.PhaseUnpacking, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnpacking, "Fetching the bundle's source")
		}
		return ctrl.Result{}, nil
	}
	if err != nil {
		// RukPak's words for a source that could not be fetched; a format
		// error (below) says what is wrong with the content itself.
		r.setFailing(b, fmt.Errorf("%s%w", sourceFailed, err))
		return ctrl.Result{}, fmt.Errorf("unpacking bundle %q: %w", b.Name, err)
	}
	defer func() { _ = res.Close() }()

	switch res.State {
	case unpack.StatePending:
		// A source that is not there yet (a ConfigMap not created, or
		// misspelt) fails as RukPak reported it, so a typo is seen; it is
		// looked at again, and a watch unpacks it once it appears. The
		// event goes out when the failure is new, not at every retry.
		msg := sourceFailed + res.Message
		if c := conditions.Get(b.Status.Conditions, rukpakv1alpha1.TypeUnpacked); c == nil || c.Reason != rukpakv1alpha1.ReasonUnpackFailed || c.Message != msg {
			r.event(b, "Warning", rukpakv1alpha1.ReasonUnpackFailed, msg)
		}
		b.Status.ObservedGeneration = b.Generation
		setPhase(b, rukpakv1alpha1.PhaseFailing, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnpackFailed, msg)
		return ctrl.Result{RequeueAfter: pendingRequeue}, nil
	case unpack.StateUnpacking:
		setPhase(b, rukpakv1alpha1.PhaseUnpacking, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnpacking, res.Message)
		return ctrl.Result{RequeueAfter: pendingRequeue}, nil
	case unpack.StateUnpacked:
	default:
		return ctrl.Result{}, fmt.Errorf("unpacker returned unknown state %q", res.State)
	}

	content, err := r.Handler.Handle(ctx, res.FS, b)
	if err != nil {
		err = unpack.Terminal(err)
		r.setFailing(b, err)
		return ctrl.Result{}, err
	}
	if err := r.store(ctx, b, content); err != nil {
		r.setFailing(b, fmt.Errorf("storing content: %w", err))
		return ctrl.Result{}, fmt.Errorf("storing content of bundle %q: %w", b.Name, err)
	}
	url, err := r.Storage.URLFor(ctx, b)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("content URL of bundle %q: %w", b.Name, err)
	}
	if d, ok := r.Storage.(storage.Digester); ok {
		digest, err := d.Digest(ctx, b)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("digest of bundle %q: %w", b.Name, err)
		}
		b.Status.ContentDigest = digest
	}

	b.Status.ResolvedSource = res.ResolvedSource
	b.Status.ContentURL = url
	b.Status.ObservedGeneration = b.Generation
	// No event: the Unpacked condition says it, and an event is one more
	// API write per install (issue 15); failures have theirs.
	// RukPak's words, naming the source type.
	setPhase(b, rukpakv1alpha1.PhaseUnpacked, metav1.ConditionTrue, rukpakv1alpha1.ReasonUnpackSuccessful,
		fmt.Sprintf("Successfully unpacked the %s Bundle", b.Spec.Source.Type))
	return ctrl.Result{}, nil
}

// store stores content as b's, telling Stored.
func (r *Reconciler) store(ctx context.Context, b *rukpakv1alpha1.Bundle, content fs.FS) error {
	hs, ok := r.Storage.(storage.HashingStorer)
	if !ok || r.Stored == nil {
		return r.Storage.Store(ctx, b, content)
	}
	sum, err := hs.StoreHashed(ctx, b, content)
	if err != nil {
		return err
	}
	r.Stored(ctx, b, content, sum)
	return nil
}

// sourceFailed begins the Unpacked message of a source that could not be
// fetched (a ConfigMap not found, an http 404), as RukPak's did.
const sourceFailed = "source bundle content: "

func (r *Reconciler) setFailing(b *rukpakv1alpha1.Bundle, err error) {
	b.Status.ObservedGeneration = b.Generation
	setPhase(b, rukpakv1alpha1.PhaseFailing, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnpackFailed, err.Error())
	r.event(b, "Warning", rukpakv1alpha1.ReasonUnpackFailed, err.Error())
}

func setPhase(b *rukpakv1alpha1.Bundle, phase string, status metav1.ConditionStatus, reason, message string) {
	b.Status.Phase = phase
	conditions.Set(&b.Status.Conditions, b.Generation, rukpakv1alpha1.TypeUnpacked, status, reason, message)
}

func (r *Reconciler) event(b *rukpakv1alpha1.Bundle, typ, reason, msg string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(b, nil, typ, reason, "Unpack", "%s", msg)
	}
}

func (r *Reconciler) updateStatus(ctx context.Context, before, after *rukpakv1alpha1.Bundle) error {
	if equality.Semantic.DeepEqual(before.Status, after.Status) {
		return nil
	}
	// Answered with the Bundle's metadata only: nothing reads the rest of
	// the answer (the status is the one written), which was the whole
	// Bundle decoded again.
	written := &metav1.PartialObjectMetadata{}
	written.SetGroupVersionKind(rukpakv1alpha1.GroupVersion.WithKind("Bundle"))
	written.Name = after.Name
	if err := r.Client.Status().Patch(ctx, written, statuspatch.MergeFrom(before.Status, after.Status)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("updating status of bundle %q: %w", after.Name, err)
	}
	after.ResourceVersion = written.ResourceVersion
	return nil
}

// kind labels a Bundle's metrics.
const kind = "Bundle"

// observeUnpack records a finished fetch's duration and, once unpacked, the
// bytes of its content.
func (r *Reconciler) observeUnpack(b *rukpakv1alpha1.Bundle, took time.Duration, res *unpack.Result, err error) {
	if err == nil && res != nil && res.State != unpack.StateUnpacked {
		return // waiting for the source (a ConfigMap not created yet): no fetch happened
	}
	var n int64
	if err == nil {
		n, err = contentBytes(res.FS)
	}
	metrics.ObserveUnpack(r.Class, string(b.Spec.Source.Type), took, n, err)
}

// contentBytes adds up the sizes of the regular files in fsys.
func contentBytes(fsys fs.FS) (int64, error) {
	var n int64
	err := fs.WalkDir(fsys, ".", func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sizing unpacked content: %w", err)
	}
	return n, nil
}

func (r *Reconciler) finalize(ctx context.Context, b *rukpakv1alpha1.Bundle) error {
	if !controllerutil.ContainsFinalizer(b, rukpakv1alpha1.FinalizerDeleteCachedBundle) {
		return nil
	}
	if err := r.Storage.Delete(ctx, b); err != nil {
		return fmt.Errorf("deleting stored content of bundle %q: %w", b.Name, err)
	}
	if err := r.forget(ctx, b); err != nil {
		return err
	}
	if rel, ok := r.Unpacker.(releaser); ok {
		if err := rel.Release(b); err != nil {
			return fmt.Errorf("releasing the source of bundle %q: %w", b.Name, err)
		}
	}
	if err := finalizer.Remove(ctx, r.Client, b, rukpakv1alpha1.FinalizerDeleteCachedBundle); err != nil {
		return err
	}
	metrics.Forget(kind, b.Name)
	return nil
}

// releaser is an Unpacker that keeps something per Bundle (an uploaded
// archive) until the Bundle is deleted.
type releaser interface {
	Release(b *rukpakv1alpha1.Bundle) error
}

// forgetter is an Unpacker that caches sources (images, by digest).
type forgetter interface {
	Forget(resolved *rukpakv1alpha1.BundleSource) error
}

// forget drops the unpacker's cache of b's source unless another Bundle
// still uses the same resolved source, so the cache does not grow forever.
func (r *Reconciler) forget(ctx context.Context, b *rukpakv1alpha1.Bundle) error {
	f, ok := r.Unpacker.(forgetter)
	if !ok || b.Status.ResolvedSource == nil {
		return nil
	}
	list := &rukpakv1alpha1.BundleList{}
	// Read only: the cache's own objects, not a copy of every Bundle.
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing bundles: %w", err)
	}
	for i := range list.Items {
		other := &list.Items[i]
		if other.Name != b.Name && other.DeletionTimestamp.IsZero() && sameCached(other.Status.ResolvedSource, b.Status.ResolvedSource) {
			return nil
		}
	}
	if err := f.Forget(b.Status.ResolvedSource); err != nil {
		return fmt.Errorf("dropping cached source of bundle %q: %w", b.Name, err)
	}
	return nil
}

// sameCached says whether two resolved sources share what the unpacker
// caches of them: an image's tree, by its pinned reference (repository and
// digest) whatever else the sources say (a pull secret, a CA); any other
// source, by all of it.
func sameCached(a, b *rukpakv1alpha1.BundleSource) bool {
	if a != nil && b != nil && a.Type == rukpakv1alpha1.SourceTypeImage && b.Type == rukpakv1alpha1.SourceTypeImage && a.Image != nil && b.Image != nil {
		return a.Image.Ref == b.Image.Ref
	}
	return equality.Semantic.DeepEqual(a, b)
}

// SetupWithManager registers the reconciler for Bundles of r.Class.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("rukpak-" + r.Class)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("bundle-"+r.Class).
		For(&rukpakv1alpha1.Bundle{}, builder.WithPredicates(
			predicate.NewPredicateFuncs(func(o client.Object) bool {
				b, ok := o.(*rukpakv1alpha1.Bundle)
				return ok && b.Spec.ProvisionerClassName == r.Class
			}),
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, deletionPredicate()),
		)).
		// A Bundle waiting for a ConfigMap it names unpacks as soon as the
		// ConfigMap appears.
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.bundlesUsingConfigMap)).
		// A Bundle whose fetch finished takes its result.
		WatchesRawSource(r.background().source()).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.workers()}).
		Complete(r)
}

func (r *Reconciler) bundlesUsingConfigMap(ctx context.Context, o client.Object) []reconcile.Request {
	list := &rukpakv1alpha1.BundleList{}
	// Read only, on every ConfigMap change: no copy of every Bundle.
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing bundles for a ConfigMap change")
		return nil
	}
	var reqs []reconcile.Request
	for _, b := range list.Items {
		if b.Spec.ProvisionerClassName != r.Class || b.Spec.Source.Type != rukpakv1alpha1.SourceTypeConfigMaps {
			continue
		}
		for _, cm := range b.Spec.Source.ConfigMaps {
			if cm.ConfigMap.Name == o.GetName() {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: b.Name}})
				break
			}
		}
	}
	return reqs
}

// deletionPredicate passes updates that start or finish a deletion, so the
// finalizer runs; status-only updates are filtered to avoid self-triggering.
func deletionPredicate() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
}
