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
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/crdupgrade"
	"github.com/rukpak-dev/rukpak/internal/objmeta"
	"github.com/rukpak-dev/rukpak/internal/statuspatch"
	"github.com/rukpak-dev/rukpak/provisioner/catalogsource"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/finalizer"
	"github.com/rukpak-dev/rukpak/provisioner/memo"
	"github.com/rukpak-dev/rukpak/provisioner/metrics"
	"github.com/rukpak-dev/rukpak/provisioner/release"
	"github.com/rukpak-dev/rukpak/provisioner/shard"
	"github.com/rukpak-dev/rukpak/storage"
)

// ObjectsFunc turns a Bundle's stored content into the objects to install,
// applying the BundleDeployment's config. Its errors are shown to users.
type ObjectsFunc func(ctx context.Context, fsys fs.FS, bd *rukpakv1alpha1.BundleDeployment) ([]*unstructured.Unstructured, error)

// Installer installs and uninstalls a BundleDeployment's release. The plain
// and registry classes apply their content's objects as they are
// (release.Manager, through ObjectInstaller); the helm class renders and
// installs a chart with Helm's action library.
type Installer interface {
	// Install makes release bd.Name hold what fsys holds for bd: objs are
	// what Objects found in it (nil without Objects), and stamp marks every
	// object the release installs (owner label and controller reference).
	// The result's Objects are the installed objects drift correction and
	// health look at.
	Install(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, fsys fs.FS, objs []*unstructured.Unstructured, stamp func(*unstructured.Unstructured)) (*release.Result, error)
	// Uninstall removes release name and returns the objects it left alone
	// because they are not the release's (any more).
	Uninstall(ctx context.Context, name string) (kept []string, err error)
	// Deleter backs up an uninstall that stopped part way.
	Deleter
}

// WatchingInstaller is an Installer whose installs read other objects (a
// chart's values): SetupWatches makes a change to one reconcile the
// BundleDeployments that read it.
type WatchingInstaller interface {
	Installer
	SetupWatches(mgr ctrl.Manager, c controller.Controller) error
}

// ObjectInstaller installs the objects Objects found, as they are.
type ObjectInstaller struct{ *release.Manager }

// Install applies objs as release bd.Name. They are the reconcile's own
// (decoded, or copies out of the ObjectCache, which keeps its own), so
// they are stamped in place rather than copied once more.
func (i ObjectInstaller) Install(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, _ fs.FS, objs []*unstructured.Unstructured, stamp func(*unstructured.Unstructured)) (*release.Result, error) {
	return i.ApplyOwned(ctx, bd.Name, objs, stamp)
}

// DefaultMaxBundles bounds the Bundles one BundleDeployment may have
// generated at once: the active one, the one being rolled out, and a few
// that failed to unpack and are kept for inspection.
const DefaultMaxBundles = 5

// Reconciler installs BundleDeployments of one provisioner class.
type Reconciler struct {
	Client client.Client
	Class  string
	// Installed, when set, is the cache of installed objects' metadata
	// (NewInstalledCache) shared with the other classes' reconcilers and
	// crdaccess; else SetupWithManager makes one of its own.
	Installed cache.Cache
	Loader    storage.Loader
	// Objects, when set, lists the objects of a Bundle's content before
	// they are installed (the CRD preflight checks them): a function of
	// the content and spec.config only, whose results ObjectCache keeps.
	Objects ObjectsFunc
	// ObjectsName names Objects in ObjectCache's keys: reconcilers whose
	// Objects are the same function share its entries (default: Class).
	ObjectsName string
	// Settle, when set, adjusts what Objects found to the cluster (it may
	// read it) before the objects are placed and installed; never cached.
	Settle func(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error)
	// ObjectCache, when set, keeps what Objects found, keyed by the SHA-256
	// of the content's archive as Loader (a storage.HashingLoader) read it,
	// ObjectsName and spec.config's bytes: a reconcile of unchanged inputs
	// neither loads nor decodes the content again.
	ObjectCache *memo.Cache
	// Releases reads installed objects' ownership; it is also the
	// Installer unless one is set.
	Releases   *release.Manager
	Installer  Installer
	Recorder   events.EventRecorder
	MaxBundles int
	// BundleClasses are the classes whose Bundles this process unpacks:
	// their Bundles are created with the Bundle reconciler's finalizer, and
	// a BundleDeployment waits without a status write until such a Bundle
	// first reports (see writes.go).
	BundleClasses []string
	// Explain, when set, adds context to install errors caused by kinds
	// missing from the cluster (for example a bundle's declared
	// dependencies).
	Explain func(fsys fs.FS) string
	// Preflight, when set, checks a new Bundle's CRDs against the custom
	// resources already stored before anything of the Bundle is applied.
	Preflight *crdupgrade.Preflight
	// PodReader, when set, reads the pods of an unready workload to say
	// why (a crash loop, an image that cannot be pulled); an uncached
	// reader, so no informer holds every pod of the cluster.
	PodReader client.Reader
	// Identity, when set, installs as the ServiceAccount a
	// BundleDeployment names, after checking its permissions.
	Identity *Identity
	// Prepare, when set, completes the objects with what only the cluster
	// holds (serving certificates and their CA bundles) just before they
	// are applied, and says when to look again (zero: no need).
	Prepare func(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, objs []*unstructured.Unstructured) (time.Time, error)
	// Shard, when set, is the part of the cluster this process reconciles
	// (its cache holds only that part): the Bundles a BundleDeployment
	// generates carry its shard labels, and those still labelled for
	// another shard (it was moved) are relabelled (see adopt).
	Shard *shard.Shard
	// BundleReader reads Bundles outside this shard's cache: an uncached
	// reader.
	BundleReader client.Reader
	// ContentURL is where this process serves a Bundle's content
	// (storage.Storage's URLFor): content a Bundle's status says is
	// elsewhere, and that does not load, is waited for rather than failed.
	ContentURL func(ctx context.Context, b *rukpakv1alpha1.Bundle) (string, error)
	// Catalogs, when set, resolves templates with a catalog source
	// (catalog.go); without it they fail to resolve.
	Catalogs CatalogResolver
	// RetryBase and RetryMax shape the backoff of failing installs (zero:
	// DefaultRetryBase, DefaultRetryMax; see backoff.go).
	RetryBase, RetryMax time.Duration
	// UnhealthyRecheck is how soon an unhealthy BundleDeployment is first
	// judged again without an event (zero: DefaultUnhealthyRecheck); each
	// next recheck finding no change waits twice as long, up to RetryMax
	// (see recheck.go).
	UnhealthyRecheck time.Duration

	tracker *Tracker
	records records
	// retries and rechecks are set up by SetupWithManager.
	retries  *retries
	rechecks *rechecks
	// settled holds the BundleDeployments a reconcile need only judge
	// (settled.go).
	settled *settledSet
}

// Reconcile brings one BundleDeployment's installed content in line with its
// template.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	bd := &rukpakv1alpha1.BundleDeployment{}
	if err := r.Client.Get(ctx, req.NamespacedName, bd); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.Forget(kind, req.Name)
			r.retries.forget(req.Name)
			r.rechecks.forget(req.Name)
			r.settled.forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if bd.Spec.ProvisionerClassName != r.Class {
		r.settled.forget(bd.Name)
		return ctrl.Result{}, nil
	}
	if bd.DeletionTimestamp.IsZero() {
		// A failing install waits for its next attempt: events of its
		// installed objects and rechecks change nothing it could fix.
		if d := r.retries.wait(bd); d > 0 {
			return ctrl.Result{RequeueAfter: d}, nil
		}
	} else {
		r.retries.forget(bd.Name)
		r.settled.forget(bd.Name)
	}
	defer metrics.ObserveReconcile(metrics.ControllerBundleDeployment, r.Class, time.Now())
	if !bd.DeletionTimestamp.IsZero() {
		r.records.load(bd)
		err := r.finalize(ctx, bd)
		if _, ok := pending(err); ok {
			// The Installer reconciles bd again once it may go on.
			return ctrl.Result{RequeueAfter: pendingRecheck}, nil
		}
		return ctrl.Result{}, err
	}
	// With the first Bundle's creation intent in the same patch (intent.go).
	if err := r.ensureFinalizer(ctx, bd); err != nil {
		return ctrl.Result{}, err
	}
	// After ensureFinalizer, whose patch answer replaces the status read so
	// far.
	r.records.load(bd)
	r.records.catchUp(bd)

	// A catalog source is resolved to the concrete template everything
	// below works on, in memory only (catalog.go): status writes carry no
	// spec.
	var cat *resolution
	if !bd.Spec.Paused {
		cat = r.resolveCatalog(ctx, bd)
	}
	if cat != nil && cat.spec != nil {
		bd.Spec.Template.Spec = *cat.spec.DeepCopy()
	}

	// What the reconcile works on (settle): a spec, labels or
	// annotations changed meanwhile bring another reconcile.
	started := settledKeyWith(bd, &rukpakv1alpha1.Bundle{}, "")
	before := bd.DeepCopy()
	// The records as the API server has them: the patch must carry the
	// UIDs the cache (or an earlier flush) did not.
	before.Status.GeneratedBundles = r.records.persisted(bd)
	// flush writes the status, only if it changed since the last write
	// (UIDs of persisted intents alone wait for the next write: writes.go).
	flush := func() error {
		bd.Status.ObservedGeneration = bd.Generation
		if equality.Semantic.DeepEqual(before.Status, bd.Status) || onlyFillsIntents(&before.Status, &bd.Status, annotatedIntent(bd, &before.Status)) {
			return nil
		}
		from := bd.ResourceVersion
		// Answered with the metadata alone, of which only the
		// resourceVersion is taken: the status is the one written (the
		// patch replaces every list it touches, and this provisioner is
		// its only writer), and the rest of the reconcile, its
		// observedGeneration and settle's key stay with the spec,
		// generation, labels and annotations it started from (a change
		// of them brings another reconcile). The whole answer, decoded,
		// was most of what a write cost.
		written := &metav1.PartialObjectMetadata{}
		written.SetGroupVersionKind(rukpakv1alpha1.GroupVersion.WithKind("BundleDeployment"))
		written.Name = bd.Name
		if err := r.Client.Status().Patch(ctx, written, statuspatch.MergeFrom(before.Status, bd.Status)); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("updating status: %w", err)
		}
		bd.ResourceVersion = written.ResourceVersion
		r.records.wrote(bd, from)
		before = bd.DeepCopy()
		return nil
	}
	var res ctrl.Result
	var err error
	var settling settleCandidate
	if !r.paused(bd) {
		r.reportCatalog(bd, cat)
		if cat == nil || cat.spec != nil {
			res, err = r.reconcile(ctx, bd, flush, cat, &settling)
		}
		if transient := (*catalogsource.TransientError)(nil); cat != nil && errors.As(cat.err, &transient) {
			if res.RequeueAfter == 0 || res.RequeueAfter > catalogRecheck {
				res.RequeueAfter = catalogRecheck
			}
		}
	}
	// Recorded while paused too: the request was seen, and the Paused
	// condition says why nothing was done.
	r.handledRequest(bd)
	if uerr := flush(); uerr != nil {
		err = errors.Join(err, uerr)
	} else if err == nil {
		// Settled only with its status written: a settled reconcile sets
		// Healthy alone.
		r.settle(bd, &settling, started)
	}
	metrics.RecordConditions(kind, bd.Name, bd.Status.Conditions)
	return res, err
}

// kind labels a BundleDeployment's metrics.
const kind = "BundleDeployment"

func (r *Reconciler) reconcile(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, flush func() error, cat *resolution, settling *settleCandidate) (ctrl.Result, error) {
	if moved, err := r.adopt(ctx, bd); err != nil {
		return ctrl.Result{}, err
	} else if moved {
		return ctrl.Result{RequeueAfter: adoptRecheck}, nil
	}
	b, err := r.desiredBundle(ctx, bd, flush)
	if refused := (*refusedError)(nil); errors.As(err, &refused) {
		// Its own Bundle, changed by someone since (checkSpec): nothing to
		// retry until it is deleted, which need not come with an event
		// for this BundleDeployment.
		if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeHasValidBundle); c == nil || c.Message != refused.msg {
			r.event(bd, "Warning", rukpakv1alpha1.ReasonCreateBundleFailed, refused.msg)
		}
		r.set(bd, rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonCreateBundleFailed, refused.msg)
		return ctrl.Result{RequeueAfter: healthRecheck}, nil
	}
	if err != nil {
		r.set(bd, rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonCreateBundleFailed, err.Error())
		return ctrl.Result{}, err
	}

	if cat == nil {
		if res, ok := r.settledHealth(ctx, bd, b); ok {
			return res, nil
		}
	}
	r.settled.forget(bd.Name)

	fsys, objs, ready, err := r.content(ctx, bd, b)
	var held *heldPivot
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case ready:
		held, err = r.holdPivot(ctx, bd, b, objs)
	default:
		// The new Bundle cannot be installed (yet): the active one stays
		// installed, kept as declared and its health reported meanwhile.
		if held, err = r.keepActive(ctx, bd, b); held == nil && err == nil {
			return ctrl.Result{}, nil
		}
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if held != nil {
		// The active Bundle stays installed in place of b.
		b, fsys, objs = held.bundle, held.fsys, held.objs
	}

	if r.holdConfig(ctx, bd, b, objs) {
		// Approving it changes the annotation, which queues bd.
		return ctrl.Result{}, nil
	}

	perms, crds, ok, err := r.checked(ctx, bd, b, fsys, objs)
	if err != nil || !ok {
		if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled); err == nil && c != nil && c.Reason == rukpakv1alpha1.ReasonInstallPending {
			return ctrl.Result{RequeueAfter: pendingRecheck}, nil
		}
		return ctrl.Result{}, err
	}
	inst, as, res, ok, err := r.installAs(ctx, bd, b, perms)
	if err != nil || !ok {
		return res, err
	}
	ok, digests, err := r.preflight(ctx, bd, b, crds)
	if err != nil {
		return ctrl.Result{}, err
	} else if !ok {
		// Stored objects may be fixed without an event for this
		// BundleDeployment: look again now and then.
		return ctrl.Result{RequeueAfter: healthRecheck}, nil
	}
	renewAt, err := r.prepare(ctx, bd, b, objs)
	if err != nil {
		return ctrl.Result{}, err
	}
	stamp := ownerStamper(bd)
	// The records as this install finds them: it settles bd only if no
	// one wrote one since (settle).
	records, recorded := r.recordsOf(bd)
	result, err := inst.Install(ctx, bd, fsys, objs, stamp)
	// Also after a failed install: it may have applied part of it.
	r.recordInstalled(bd)
	if p, ok := pending(err); ok {
		// The attempt goes on in the background: its outcome is taken at
		// once, however long a failure before it backs off.
		r.retries.wake(bd.Name)
		r.setPending(bd, p)
		return ctrl.Result{RequeueAfter: pendingRecheck}, nil
	}
	if err != nil {
		reason := rukpakv1alpha1.ReasonInstallFailed
		if result != nil && result.Upgraded {
			reason = rukpakv1alpha1.ReasonUpgradeFailed
		}
		in, at := r.retries.failed(bd, missingGroups(err))
		msg := err.Error()
		if meta.IsNoMatchError(err) || strings.Contains(msg, "no matches for kind") {
			msg = "required resource not found: " + msg
			if r.Explain != nil {
				// Loads the content: once per Bundle for a failing install's
				// retries.
				if extra := r.retries.explanation(bd.Name, explainedOf(b), func() string { return r.Explain(fsys) }); extra != "" {
					msg += "; " + extra
				}
			}
		}
		r.set(bd, rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, reason, retryMessage(cutForRetry(msg), in, at))
		// Without the announcement: repeated failures stay one event series.
		r.event(bd, "Warning", reason, msg)
		log.FromContext(ctx).Error(err, "applying bundle", "bundle", b.Name, "nextAttemptIn", in)
		return ctrl.Result{RequeueAfter: in}, nil
	}
	r.retries.succeeded(bd.Name)
	if result.Changed && r.settles(bd) {
		// Its own writes changed the records: settled with the records as
		// they left them, not waiting for the reconcile those writes'
		// events bring to go the full way once more.
		records, recorded = result.Records()
	}
	stamped := result.Objects
	var taken []takenObject
	if result.Changed {
		r.tracker.Forget(bd.Name)
		r.tracker.Applied(bd.Name, result)
		r.preflightPassed(crds, digests, result)
		r.droppedEvents(bd, result.Dropped)
		r.installedEvent(bd, b, result)
	} else {
		if err := r.tracker.Watch(stamped); err != nil {
			return ctrl.Result{}, err
		}
		if taken, err = r.correctDrift(ctx, as, bd.Name, stamped); err != nil {
			return ctrl.Result{}, err
		}
	}
	if len(taken) > 0 {
		// Objects of the release that another release owns now stay with
		// it: this BundleDeployment reports that it no longer has them.
		msg := ownedElsewhereMessage(taken)
		if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled); c == nil || c.Message != msg {
			r.event(bd, "Warning", rukpakv1alpha1.ReasonInstallFailed, msg)
		}
		r.set(bd, rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInstallFailed, msg)
		stamped = without(stamped, taken)
	} else {
		r.set(bd, rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded,
			fmt.Sprintf("Instantiated bundle %q successfully", b.Name))
	}
	bd.Status.ActiveBundle = b.Name
	recordInstalledCatalogBundle(bd, cat, b)
	metrics.Release(bd.Name, result.ManifestSize(), len(result.Objects))
	if result.Changed {
		metrics.ObjectsApplied(r.Class, len(result.Objects))
	}

	if ready {
		if err := r.pivot(ctx, bd, b); err != nil {
			return ctrl.Result{}, err
		}
	}
	if result.Changed {
		if len(stamped) > healthFirstMax {
			// Installed is the outcome of the apply: report it now, not
			// after the watches on newly installed kinds have synced and
			// health is known (for 1,000 objects that wait was ~0.2 s).
			if err := flush(); err != nil {
				return ctrl.Result{}, err
			}
		}
		if err := r.tracker.Watch(stamped); err != nil {
			return ctrl.Result{}, err
		}
	}
	res, err = r.health(ctx, bd, stamped)
	res = requeueBy(res, renewAt, time.Now())
	if err == nil && cat == nil && ready && held == nil && len(taken) == 0 && recorded {
		*settling = settleCandidate{bundle: b, objs: stamped, renewAt: renewAt, records: records}
	}
	if len(taken) > 0 && res.RequeueAfter == 0 {
		// Events on the taken objects go to their new owner: look again
		// now and then, to restore them once that owner lets them go.
		res.RequeueAfter = healthRecheck
	}
	return res, err
}

// installedEvent records an install that changed the release, unless it is
// the first install: the Installed condition says all of that one (issue
// 15: an event is an API write), while an upgrade's from-which-to-which is
// history the conditions overwrite at the next change. Called before
// status.activeBundle moves to b.
func (r *Reconciler) installedEvent(bd *rukpakv1alpha1.BundleDeployment, b *rukpakv1alpha1.Bundle, result *release.Result) {
	from := bd.Status.ActiveBundle
	rev := result.Release.Version
	switch {
	case !result.Upgraded && from == "":
		return
	case !result.Upgraded && from == b.Name:
		// The release had no record left: installed again.
		r.event(bd, "Normal", rukpakv1alpha1.ReasonInstallationSucceeded, fmt.Sprintf("Installed bundle %q again (release revision %d)", b.Name, rev))
	case !result.Upgraded:
		r.event(bd, "Normal", rukpakv1alpha1.ReasonInstallationSucceeded, fmt.Sprintf("Installed bundle %q in place of %q (release revision %d)", b.Name, from, rev))
	case from != "" && from != b.Name:
		r.event(bd, "Normal", rukpakv1alpha1.ReasonInstallationSucceeded, fmt.Sprintf("Upgraded from bundle %q to %q (release revision %d)", from, b.Name, rev))
	default:
		r.event(bd, "Normal", rukpakv1alpha1.ReasonInstallationSucceeded, fmt.Sprintf("Upgraded bundle %q in place (release revision %d)", b.Name, rev))
	}
}

// healthRecheck is how often an unhealthy BundleDeployment is looked at
// even without a watch event (for example when a kind has no status).
const healthRecheck = 30 * time.Second

// healthFirstMax is the largest release whose health, read right after
// an install, goes out in one status write with Installed (issue 15: one
// write per install fewer); a larger release reports Installed first, so
// reading its objects' health does not delay it.
const healthFirstMax = 100

func (r *Reconciler) health(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, objs []*unstructured.Unstructured) (ctrl.Result, error) {
	bad, whats, err := r.unhealthy(ctx, bd.Name, objs)
	if err != nil {
		return ctrl.Result{}, err
	}
	return r.reportHealth(bd, bad, whats), nil
}

// reportHealth sets the Healthy condition from the unhealthy objects' sorted
// messages (bad, with pod reasons; whats, without: what a recheck compares).
func (r *Reconciler) reportHealth(bd *rukpakv1alpha1.BundleDeployment, bad, whats []string) ctrl.Result {
	what := strings.Join(whats, "\n")
	if len(bad) == 0 {
		r.rechecks.forget(bd.Name)
		r.set(bd, rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "All installed objects are healthy")
		return ctrl.Result{}
	}
	const shown = 10
	msg := strings.Join(bad[:min(len(bad), shown)], "; ")
	if len(bad) > shown {
		msg += fmt.Sprintf("; and %d more", len(bad)-shown)
	}
	r.set(bd, rukpakv1alpha1.TypeHealthy, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnhealthy, "Unhealthy objects: "+msg)
	return ctrl.Result{RequeueAfter: r.rechecks.unhealthy(bd.Name, bd.Generation, what)}
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
		objmeta.Set(o, "labels", []string{rukpakv1alpha1.LabelOwnerKind, "BundleDeployment", rukpakv1alpha1.LabelOwnerName, bd.Name})
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

func (r *Reconciler) installer() Installer {
	if r.Installer != nil {
		return r.Installer
	}
	return ObjectInstaller{r.Releases}
}

func (r *Reconciler) finalize(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment) error {
	if !controllerutil.ContainsFinalizer(bd, rukpakv1alpha1.FinalizerUninstall) {
		return nil
	}
	inst, err := r.uninstaller(bd)
	if err != nil {
		return err
	}
	kept, err := inst.Uninstall(ctx, bd.Name)
	if err != nil {
		return err
	}
	left, keptLeft, err := r.tracker.DeleteOwned(ctx, inst, bd.Name)
	if err != nil {
		return err
	}
	if left > 0 {
		log.FromContext(ctx).Info("deleted objects the release uninstall left behind", "count", left)
	}
	for _, k := range keptLeft {
		if !slices.Contains(kept, k) {
			kept = append(kept, k)
		}
	}
	if len(kept) > 0 {
		// Objects the release once installed that are someone else's now:
		// the uninstall leaves them, and says so.
		const shown = 10
		msg := "Left objects the release no longer owns: " + strings.Join(kept[:min(len(kept), shown)], ", ")
		if len(kept) > shown {
			msg += fmt.Sprintf(" and %d more", len(kept)-shown)
		}
		r.event(bd, "Warning", "UninstallKeptObjects", msg)
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
	if err := finalizer.Remove(ctx, r.Client, bd, rukpakv1alpha1.FinalizerUninstall); err != nil {
		return err
	}
	r.records.drop(bd)
	metrics.Forget(kind, bd.Name)
	return nil
}

func (r *Reconciler) set(bd *rukpakv1alpha1.BundleDeployment, typ string, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(&bd.Status.Conditions, bd.Generation, typ, status, reason, msg)
	if typ == rukpakv1alpha1.TypeInstalled && status == metav1.ConditionFalse && bd.Status.ActiveBundle == "" {
		// Nothing is installed, so nothing is healthy: RukPak v0.16 said
		// so in these words, and waits on Healthy=False rely on them. Once
		// a Bundle is active it stays installed through a failed pivot,
		// and Healthy goes on reporting its objects.
		conditions.Set(&bd.Status.Conditions, bd.Generation, rukpakv1alpha1.TypeHealthy, metav1.ConditionFalse,
			rukpakv1alpha1.ReasonInstallationStatusFalse, "Installed condition is false")
	}
}

// maxNote is the API server's limit on an event's note: a longer one is
// rejected, and the event lost.
const maxNote = 1024

func (r *Reconciler) event(bd *rukpakv1alpha1.BundleDeployment, typ, reason, msg string) {
	r.eventRelated(bd, nil, typ, reason, msg)
}

// eventRelated records an event on bd about related (nil for none).
func (r *Reconciler) eventRelated(bd *rukpakv1alpha1.BundleDeployment, related runtime.Object, typ, reason, msg string) {
	if len(msg) > maxNote {
		msg = strings.ToValidUTF8(msg[:maxNote-3], "") + "..."
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(bd, related, typ, reason, "Reconcile", "%s", msg)
	}
}

// reasonFieldsDropped is the reason of the events naming fields an install
// left out because the API server's schema does not declare them.
const reasonFieldsDropped = "UndeclaredFieldsDropped"

// droppedEvents warns, one event per object (the first shownDropped), of
// fields the install left out: a create, as OLM sends, would have dropped
// them too, but silently. Each event is related to its object, which also
// keeps the event recorder from folding them into one series (its key
// leaves the note out).
func (r *Reconciler) droppedEvents(bd *rukpakv1alpha1.BundleDeployment, dropped []release.DroppedFields) {
	const shownDropped = 10
	for _, d := range dropped[:min(len(dropped), shownDropped)] {
		r.eventRelated(bd, &d.Ref, "Warning", reasonFieldsDropped, fmt.Sprintf("Dropped from %s the fields the API server's schema does not declare: %s", d.Object, strings.Join(d.Fields, ", ")))
	}
	if len(dropped) > shownDropped {
		r.event(bd, "Warning", reasonFieldsDropped, fmt.Sprintf("Dropped fields the API server's schema does not declare from %d more objects (listed in their annotation %s)", len(dropped)-shownDropped, release.AnnotationDroppedFields))
	}
}

// SetupWithManager registers the reconciler for BundleDeployments of
// r.Class, and watches the Bundles they generate and the objects they
// install.
// recordChanges reconciles the BundleDeployment whose release records
// someone else wrote or deleted (a Helm CLI upgrade or rollback, a hand
// edit) without waiting for an event of its own: what they did to its
// objects, or to what the provisioner's records say of them, is undone or
// taken up by the reconcile. The index tells a release at most once every
// few seconds (release.Manager.OnRecordChange), however many records are
// written, which bounds what a loop of writes costs. Names are not looked
// up here: Reconcile skips another class's BundleDeployments and ones
// that do not exist.
func (r *Reconciler) recordChanges() source.Func {
	return func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		r.Releases.OnRecordChange(func(name string) {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		})
		return nil
	}
}

func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("rukpak-" + r.Class)
	}
	tracker, err := newTracker(mgr, r.Installed)
	if err != nil {
		return err
	}
	if err := indexBundles(mgr); err != nil {
		return err
	}
	if r.Releases != nil {
		tracker.recordedAt = r.Releases.RecordedAt
	}
	r.tracker = tracker
	r.retries = newRetries(r.RetryBase, r.RetryMax)
	r.rechecks = newRechecks(r.UnhealthyRecheck, r.RetryMax)
	r.settled = newSettledSet()
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("bundledeployment-"+r.Class).
		For(&rukpakv1alpha1.BundleDeployment{}, builder.WithPredicates(r.forgetOnMove(), predicate.NewPredicateFuncs(func(o client.Object) bool {
			bd, ok := o.(*rukpakv1alpha1.BundleDeployment)
			return ok && bd.Spec.ProvisionerClassName == r.Class
		}),
			// Status writes (the reconciler's own) and metadata edits change
			// nothing to do; spec changes and deletion bump the generation.
			// A full reconcile of a 1,000-object bundle costs ~0.2 s of CPU.
			predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, skipPreflightChanged, reconcileRequested, approvalChanged))).
		Watches(&rukpakv1alpha1.Bundle{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			// A change of its Bundle may fix a failing install.
			return r.wokenRequests(ownerRequest(context.TODO(), o))
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Build(r)
	if err != nil {
		return err
	}
	tracker.controller = c
	if r.Releases != nil {
		if err := c.Watch(r.recordChanges()); err != nil {
			return fmt.Errorf("watching release records: %w", err)
		}
	}
	if r.Catalogs != nil {
		// New catalog content, priorities or labels may resolve a catalog
		// source to another bundle.
		if err := c.Watch(source.Kind(mgr.GetCache(), client.Object(&rukpakv1alpha1.Catalog{}),
			handler.EnqueueRequestsFromMapFunc(r.catalogRequests), catalogChanged)); err != nil {
			return fmt.Errorf("watching catalogs: %w", err)
		}
	}
	if err := r.watchCRDs(mgr, c); err != nil {
		return err
	}
	if w, ok := r.Installer.(WatchingInstaller); ok {
		// What its watches report (values sources, the ends of background
		// jobs) may fix a failing install.
		if err := w.SetupWatches(mgr, wakingController{c, r.retries.wake}); err != nil {
			return fmt.Errorf("watching what %s installs read: %w", r.Class, err)
		}
	}
	return nil
}
