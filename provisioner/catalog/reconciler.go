// Package catalog holds the Catalog reconciler: it fetches a Catalog's
// source with the Bundle unpackers, validates it as a file-based catalog,
// stores it as one indexed document and reports where it is served.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	"sigs.k8s.io/controller-runtime/pkg/source"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/catalog/fbc"
	"github.com/rukpak-dev/rukpak/internal/backoff"
	"github.com/rukpak-dev/rukpak/internal/statuspatch"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/finalizer"
	"github.com/rukpak-dev/rukpak/storage"
	"github.com/rukpak-dev/rukpak/unpack"
)

// pendingRequeue is how often a Catalog whose source is not there yet (a
// ConfigMap not created) is looked at again.
const pendingRequeue = 15 * time.Second

// Reconciler unpacks, validates, stores and serves Catalogs.
type Reconciler struct {
	Client   client.Client
	Unpacker unpack.Unpacker
	Store    *storage.CatalogStore
	// Limits bound reading one catalog (fbc.DefaultLimits when zero).
	Limits fbc.Limits
	// FetchTimeout bounds one fetch and validation of a Catalog's source.
	FetchTimeout time.Duration
	Recorder     events.EventRecorder

	once    sync.Once
	mu      sync.Mutex
	jobs    map[string]*job
	refresh map[string]bool
	// failures holds each Catalog's fetches that failed in a row: the next
	// is not started before retryAt (a source failing at once was fetched
	// again some 127 times a second, an outside review found).
	failures backoff.Failures
	done     chan event.GenericEvent
}

// Backoff between failed fetches of one Catalog.
const (
	retryBackoff    = 2 * time.Second
	maxRetryBackoff = 5 * time.Minute
)

// job is one Catalog's fetch and build, run outside the reconcile workers
// under a deadline: a source that never answers costs a goroutine until the
// deadline, never a worker.
type job struct {
	uid        types.UID
	generation int64
	cancel     context.CancelFunc
	finished   bool
	out        *built
	err        error
}

// built is a validated catalog document, staged for storage.Commit.
type built struct {
	staged   string
	index    *fbc.Index
	resolved *rukpakv1alpha1.BundleSource
	pending  string // the source is not there yet: why
}

func (r *Reconciler) init() {
	r.once.Do(func() {
		r.jobs = map[string]*job{}
		r.refresh = map[string]bool{}
		r.failures = backoff.Failures{Base: retryBackoff, Max: maxRetryBackoff}
		r.done = make(chan event.GenericEvent, 1024)
	})
}

func (r *Reconciler) timeout() time.Duration {
	if r.FetchTimeout > 0 {
		return r.FetchTimeout
	}
	return unpack.DefaultLimits.FetchTimeout
}

// Reconcile brings one Catalog's served content and status in line with
// its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.init()
	c := &rukpakv1alpha1.Catalog{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); err != nil {
		if apierrors.IsNotFound(err) {
			r.drop(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !c.DeletionTimestamp.IsZero() {
		r.drop(c.Name)
		if !controllerutil.ContainsFinalizer(c, rukpakv1alpha1.FinalizerDeleteCachedCatalog) {
			return ctrl.Result{}, nil
		}
		if err := r.Store.Delete(c.Name); err != nil {
			return ctrl.Result{}, fmt.Errorf("deleting stored catalog %q: %w", c.Name, err)
		}
		return ctrl.Result{}, finalizer.Remove(ctx, r.Client, c, rukpakv1alpha1.FinalizerDeleteCachedCatalog)
	}
	if err := finalizer.Ensure(ctx, r.Client, c, rukpakv1alpha1.FinalizerDeleteCachedCatalog); err != nil {
		return ctrl.Result{}, err
	}
	before := c.DeepCopy()
	res, err := r.reconcile(ctx, c)
	if uerr := r.updateStatus(ctx, before, c); uerr != nil {
		return ctrl.Result{}, errors.Join(err, uerr)
	}
	if err != nil && unpack.IsTerminal(err) {
		log.FromContext(ctx).Info("catalog unpack failed", "error", err.Error())
		return ctrl.Result{RequeueAfter: r.nextPoll(c)}, nil
	}
	return res, err
}

func (r *Reconciler) reconcile(ctx context.Context, c *rukpakv1alpha1.Catalog) (ctrl.Result, error) {
	_, storeErr := r.Store.Dir(c.Name)
	stored := storeErr == nil
	if stored {
		c.Status.ContentURL = r.Store.URLFor(c.Name)
	}
	if wait := r.retryIn(c); wait > 0 {
		// The failure stays on display until the retry's outcome.
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if !r.due(c, stored) {
		return ctrl.Result{RequeueAfter: r.nextPoll(c)}, nil
	}
	out, err, finished := r.poll(ctx, c)
	if !finished {
		return ctrl.Result{}, nil
	}
	c.Status.ObservedGeneration = c.Generation
	if err != nil {
		r.failed(c, stored, err)
		if !unpack.IsTerminal(err) {
			r.retry(c)
		}
		return ctrl.Result{}, fmt.Errorf("unpacking catalog %q: %w", c.Name, err)
	}
	if out.pending != "" {
		r.failed(c, stored, errors.New(out.pending))
		r.retry(c)
		return ctrl.Result{RequeueAfter: pendingRequeue}, nil
	}
	if err := r.Store.Commit(c.Name, out.staged, out.index.Digest); err != nil {
		_ = os.RemoveAll(out.staged)
		r.failed(c, stored, fmt.Errorf("storing the catalog: %w", err))
		return ctrl.Result{}, err
	}
	r.succeeded(c.Name)
	x := out.index
	now := metav1.Now()
	c.Status.ResolvedSource = out.resolved
	c.Status.ContentURL = r.Store.URLFor(c.Name)
	c.Status.ContentDigest = x.Digest
	c.Status.LastUnpacked = &now
	c.Status.Packages, c.Status.Channels, c.Status.Bundles = int32(x.Counts.Packages), int32(x.Counts.Channels), int32(x.Counts.Bundles)
	conditions.Set(&c.Status.Conditions, c.Generation, rukpakv1alpha1.TypeUnpacked, metav1.ConditionTrue, rukpakv1alpha1.ReasonUnpackSuccessful,
		fmt.Sprintf("Unpacked and validated %d packages, %d channels and %d bundles", x.Counts.Packages, x.Counts.Channels, x.Counts.Bundles))
	conditions.Set(&c.Status.Conditions, c.Generation, rukpakv1alpha1.TypeServing, metav1.ConditionTrue, rukpakv1alpha1.ReasonServing, "Serving content "+x.Digest)
	return ctrl.Result{RequeueAfter: r.nextPoll(c)}, nil
}

// failed records a failed fetch: the content served before, if any, stays
// served.
func (r *Reconciler) failed(c *rukpakv1alpha1.Catalog, stored bool, err error) {
	reason := rukpakv1alpha1.ReasonUnpackFailed
	var invalid *invalidCatalog
	if errors.As(err, &invalid) {
		reason = rukpakv1alpha1.ReasonCatalogInvalid
	}
	conditions.Set(&c.Status.Conditions, c.Generation, rukpakv1alpha1.TypeUnpacked, metav1.ConditionFalse, reason, err.Error())
	if stored && c.Status.ContentDigest != "" {
		conditions.Set(&c.Status.Conditions, c.Generation, rukpakv1alpha1.TypeServing, metav1.ConditionTrue, rukpakv1alpha1.ReasonServing,
			"Serving content "+c.Status.ContentDigest+" unpacked before; the last unpack failed")
	} else {
		conditions.Set(&c.Status.Conditions, c.Generation, rukpakv1alpha1.TypeServing, metav1.ConditionFalse, rukpakv1alpha1.ReasonNotServing, "No content has been unpacked")
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, reason, "Unpack", "%s", err.Error())
	}
}

// due reports whether c's source must be fetched now: a new generation,
// nothing stored, a ConfigMap it reads changed, or its poll is due.
func (r *Reconciler) due(c *rukpakv1alpha1.Catalog, stored bool) bool {
	r.mu.Lock()
	refresh := r.refresh[c.Name]
	running := r.jobs[c.Name] != nil
	r.mu.Unlock()
	switch {
	case running, refresh, c.Status.ObservedGeneration != c.Generation:
		return true
	case !stored:
		// Nothing served: unpacked before (storage lost in a restart with
		// an emptyDir), or never tried. A failure of this generation is
		// tried again at its poll.
		cond := conditions.Get(c.Status.Conditions, rukpakv1alpha1.TypeUnpacked)
		return cond == nil || cond.Status == metav1.ConditionTrue || pollDue(c)
	}
	return pollDue(c)
}

// movable reports whether src's content can change without a spec change.
func movable(src rukpakv1alpha1.BundleSource) bool {
	switch src.Type {
	case rukpakv1alpha1.SourceTypeImage:
		return src.Image != nil && !strings.Contains(src.Image.Ref, "@")
	case rukpakv1alpha1.SourceTypeGit:
		return src.Git != nil && src.Git.Ref.Commit == ""
	case rukpakv1alpha1.SourceTypeConfigMaps:
		for _, cm := range src.ConfigMaps {
			if cm.Digest == "" {
				return true
			}
		}
		return false
	}
	return true
}

func pollDue(c *rukpakv1alpha1.Catalog) bool {
	if c.Spec.PollInterval == nil || !movable(c.Spec.Source) {
		return false
	}
	last := c.Status.LastUnpacked
	if cond := conditions.Get(c.Status.Conditions, rukpakv1alpha1.TypeUnpacked); cond != nil && (last == nil || cond.LastTransitionTime.After(last.Time)) {
		last = &cond.LastTransitionTime
	}
	return last == nil || time.Since(last.Time) >= c.Spec.PollInterval.Duration
}

// nextPoll is how long until c's next poll (0: never).
func (r *Reconciler) nextPoll(c *rukpakv1alpha1.Catalog) time.Duration {
	if c.Spec.PollInterval == nil || !movable(c.Spec.Source) {
		return 0
	}
	var last time.Time
	if c.Status.LastUnpacked != nil {
		last = c.Status.LastUnpacked.Time
	}
	if cond := conditions.Get(c.Status.Conditions, rukpakv1alpha1.TypeUnpacked); cond != nil && cond.LastTransitionTime.After(last) {
		last = cond.LastTransitionTime.Time
	}
	return max(time.Until(last.Add(c.Spec.PollInterval.Duration)), time.Second)
}

// poll returns the finished fetch of c, starting one when none runs for
// this incarnation and generation.
func (r *Reconciler) poll(ctx context.Context, c *rukpakv1alpha1.Catalog) (*built, error, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.jobs[c.Name]
	if cur != nil && (cur.uid != c.UID || cur.generation != c.Generation) {
		r.dropLocked(c.Name)
		cur = nil
	}
	if cur == nil {
		delete(r.refresh, c.Name)
		r.startLocked(ctx, c)
		return nil, nil, false
	}
	if !cur.finished {
		return nil, nil, false
	}
	delete(r.jobs, c.Name)
	cur.cancel()
	return cur.out, cur.err, true
}

func (r *Reconciler) startLocked(ctx context.Context, c *rukpakv1alpha1.Catalog) {
	jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout())
	j := &job{uid: c.UID, generation: c.Generation, cancel: cancel}
	r.jobs[c.Name] = j
	c = c.DeepCopy()
	go func() {
		out, err := r.fetch(jctx, c)
		if err != nil && errors.Is(jctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("fetching and validating the catalog did not finish within %s: %w", r.timeout(), err)
		}
		r.mu.Lock()
		current := r.jobs[c.Name] == j
		if current {
			j.finished, j.out, j.err = true, out, err
		}
		r.mu.Unlock()
		if !current {
			if out != nil && out.staged != "" {
				_ = os.RemoveAll(out.staged)
			}
			return
		}
		r.done <- event.GenericEvent{Object: c}
	}()
}

// invalidCatalog is content that is not a valid file-based catalog.
type invalidCatalog struct{ err error }

func (e *invalidCatalog) Error() string { return "invalid catalog: " + e.err.Error() }
func (e *invalidCatalog) Unwrap() error { return e.err }

// fetch unpacks c's source and builds its document in a staging directory.
func (r *Reconciler) fetch(ctx context.Context, c *rukpakv1alpha1.Catalog) (out *built, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, unpack.Terminal(fmt.Errorf("unpacking panicked: %v", p))
		}
	}()
	// The unpackers take a Bundle: one that carries the Catalog's name and
	// source, never stored.
	b := &rukpakv1alpha1.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, UID: c.UID},
		Spec:       rukpakv1alpha1.BundleSpec{Source: c.Spec.Source},
	}
	res, err := r.Unpacker.Unpack(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("catalog source: %w", err)
	}
	defer func() { _ = res.Close() }()
	if res.State != unpack.StateUnpacked {
		return &built{pending: res.Message}, nil
	}
	staged, err := r.Store.Stage()
	if err != nil {
		return nil, err
	}
	x, err := fbc.Build(res.FS, staged, r.Limits)
	if err != nil {
		_ = os.RemoveAll(staged)
		return nil, unpack.Terminal(&invalidCatalog{err: err})
	}
	if f, ok := r.Unpacker.(interface {
		Forget(*rukpakv1alpha1.BundleSource) error
	}); ok && res.ResolvedSource != nil {
		// The document is what is kept; an image's unpacked tree is not
		// needed again.
		_ = f.Forget(res.ResolvedSource)
	}
	return &built{staged: staged, index: x, resolved: res.ResolvedSource}, nil
}

// retry makes the next reconcile of name fetch again.
// retry marks c for another fetch once its backoff has passed: 2 s after
// a first failure, doubled after each failure in a row of its generation,
// up to 5 minutes.
func (r *Reconciler) retry(c *rukpakv1alpha1.Catalog) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refresh[c.Name] = true
	r.failures.Failed(c.Name, backoff.Of{UID: c.UID, Generation: c.Generation})
}

// retryIn is how long c's next fetch waits for the backoff of its last
// failure: zero when none is due, a fetch runs, or c has a new generation.
func (r *Reconciler) retryIn(c *rukpakv1alpha1.Catalog) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.jobs[c.Name] != nil {
		return 0
	}
	return r.failures.Wait(c.Name, backoff.Of{UID: c.UID, Generation: c.Generation})
}

func (r *Reconciler) succeeded(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures.Forget(name)
}

func (r *Reconciler) drop(name string) {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropLocked(name)
	delete(r.refresh, name)
	r.failures.Forget(name)
}

func (r *Reconciler) dropLocked(name string) {
	j := r.jobs[name]
	if j == nil {
		return
	}
	delete(r.jobs, name)
	j.cancel()
	if j.finished && j.out != nil && j.out.staged != "" {
		_ = os.RemoveAll(j.out.staged)
	}
}

func (r *Reconciler) updateStatus(ctx context.Context, before, after *rukpakv1alpha1.Catalog) error {
	if equality.Semantic.DeepEqual(before.Status, after.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, after, statuspatch.MergeFrom(before.Status, after.Status)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("updating status of catalog %q: %w", after.Name, err)
	}
	return nil
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.init()
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("rukpak-catalog")
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("catalog").
		For(&rukpakv1alpha1.Catalog{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return !e.ObjectNew.GetDeletionTimestamp().IsZero() }},
		))).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.catalogsUsingConfigMap)).
		WatchesRawSource(source.Channel(r.done, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(r)
}

// catalogsUsingConfigMap queues, for a fetch, the Catalogs that read a
// ConfigMap that changed.
func (r *Reconciler) catalogsUsingConfigMap(ctx context.Context, o client.Object) []reconcile.Request {
	list := &rukpakv1alpha1.CatalogList{}
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing catalogs for a ConfigMap change")
		return nil
	}
	var reqs []reconcile.Request
	for _, c := range list.Items {
		for _, cm := range c.Spec.Source.ConfigMaps {
			if cm.ConfigMap.Name == o.GetName() {
				// A changed input: fetched again at once.
				r.mu.Lock()
				r.refresh[c.Name] = true
				r.failures.Forget(c.Name)
				r.mu.Unlock()
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: c.Name}})
				break
			}
		}
	}
	return reqs
}
