package bundledeployment

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// Defaults of the install backoff: a failing install is tried again after
// DefaultRetryBase, then after twice as long each time, up to
// DefaultRetryMax.
const (
	DefaultRetryBase = 5 * time.Second
	DefaultRetryMax  = 5 * time.Minute
)

// maxWaitGroups bounds the API groups one failing BundleDeployment waits
// for in the index (a bundle may miss the kinds of many groups; a retry on
// the first few is enough, the backoff covers the rest).
const maxWaitGroups = 8

// retries is the install backoff of failing BundleDeployments: while one
// waits, reconciles brought by events of its installed objects (or the
// periodic rechecks) do nothing, so a failing install costs no reads,
// renders or applies between attempts. What may fix it wakes it at once:
// a change of its spec or steering annotations (seen by wait), and
// events woken by wake: its Bundles, the values sources it reads, a CRD of
// a group it misses (wakeGroup).
//
// It holds one entry per failing BundleDeployment (dropped on success,
// change or deletion), and the index of missing groups holds at most
// maxWaitGroups names of each: bounded by the BundleDeployments, whatever
// their bundles hold.
type retries struct {
	base, max time.Duration
	now       func() time.Time

	mu      sync.Mutex
	byName  map[string]*retry
	byGroup map[string]map[string]struct{}
}

// retry is one failing BundleDeployment's backoff.
type retry struct {
	failures int
	due      time.Time
	// generation and steering are those of the failed attempt: a change
	// of either starts afresh.
	generation int64
	steering   string
	groups     []string
	// woken: something the install reads changed since the last attempt
	// began; the next reconcile attempts at once. byCRD: a CRD of a
	// missing group woke it; crdAttempt: the attempt under way began so.
	woken, byCRD, crdAttempt bool
	// explained is what Explain said of the content of the Bundle that
	// explainedFor names (its UID and resourceVersion, which a new unpack
	// moves): retries do not load it again for it.
	explainedFor string
	explained    string
}

// maxExplanation bounds an explanation kept for retries; a longer one is
// worked out again each time.
const maxExplanation = 4 << 10

// crdSettle is how soon an attempt that a new CRD of a missing group
// allowed, and that still finds a kind of that group missing, is tried
// again: the API server may serve a new kind a moment after its CRD
// reports Established. Once per CRD event, so nobody can make it loop.
const crdSettle = 2 * time.Second

func newRetries(base, limit time.Duration) *retries {
	if base <= 0 {
		base = DefaultRetryBase
	}
	if limit <= 0 {
		limit = DefaultRetryMax
	}
	limit = max(limit, base)
	return &retries{base: base, max: limit, now: time.Now, byName: map[string]*retry{}, byGroup: map[string]map[string]struct{}{}}
}

// steeringOf is what of bd's annotations changes what an attempt does.
func steeringOf(bd *rukpakv1alpha1.BundleDeployment) string {
	a := bd.Annotations
	return a[rukpakv1alpha1.AnnotationApprovedBundle] + "\x00" + a[rukpakv1alpha1.AnnotationSkipCRDUpgradePreflight] + "\x00" + a[rukpakv1alpha1.AnnotationReconcileRequestedAt]
}

// wait says how long bd's reconcile must wait before its next attempt:
// zero when it may attempt now. An attempt begins whenever it returns
// zero.
func (r *retries) wait(bd *rukpakv1alpha1.BundleDeployment) time.Duration {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.byName[bd.Name]
	if !ok {
		return 0
	}
	if e.generation != bd.Generation || e.steering != steeringOf(bd) {
		r.dropLocked(bd.Name)
		return 0
	}
	if e.woken {
		e.woken = false
		e.crdAttempt, e.byCRD = e.byCRD, false
		return 0
	}
	e.crdAttempt = false
	if d := e.due.Sub(r.now()); d > 0 {
		return d
	}
	return 0
}

// failed records a failed attempt of bd's install, missing the kinds of
// groups, and returns how long until the next one and when.
func (r *retries) failed(bd *rukpakv1alpha1.BundleDeployment, groups []string) (time.Duration, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.byName[bd.Name]
	if !ok || e.generation != bd.Generation || e.steering != steeringOf(bd) {
		r.dropLocked(bd.Name)
		e = &retry{generation: bd.Generation, steering: steeringOf(bd)}
		r.byName[bd.Name] = e
	}
	settling := e.crdAttempt && e.failures > 0 && overlaps(groups, e.groups)
	e.crdAttempt = false
	if !settling {
		e.failures++
	}
	delay := r.max
	if shift := e.failures - 1; shift < 32 && r.base<<shift > 0 && r.base<<shift < r.max {
		delay = r.base << shift
	}
	if settling {
		delay = min(delay, crdSettle)
	}
	e.due = r.now().Add(delay)
	r.unindexLocked(bd.Name, e.groups)
	if len(groups) > maxWaitGroups {
		groups = groups[:maxWaitGroups]
	}
	e.groups = groups
	for _, g := range groups {
		if r.byGroup[g] == nil {
			r.byGroup[g] = map[string]struct{}{}
		}
		r.byGroup[g][bd.Name] = struct{}{}
	}
	return delay, e.due
}

// explanation is what explain says of the content of the Bundle that of
// names, for name's failed attempt (recorded by failed first): worked out
// once and kept for the retries, as long as of names the same Bundle.
func (r *retries) explanation(name, of string, explain func() string) string {
	r.mu.Lock()
	e, ok := r.byName[name]
	kept := ok && of != "" && e.explainedFor == of
	var text string
	if kept {
		text = e.explained
	}
	r.mu.Unlock()
	if kept {
		return text
	}
	text = explain()
	if ok && len(text) <= maxExplanation {
		r.mu.Lock()
		// The entry may have been replaced meanwhile (a spec change);
		// only the one this attempt failed in keeps it.
		if r.byName[name] == e {
			e.explainedFor, e.explained = of, text
		}
		r.mu.Unlock()
	}
	return text
}

// explainedOf names what an explanation of b's content holds for: b, as
// long as it is not unpacked again.
func explainedOf(b *rukpakv1alpha1.Bundle) string {
	if b.UID == "" {
		return ""
	}
	return string(b.UID) + "@" + b.ResourceVersion
}

// succeeded ends name's backoff.
func (r *retries) succeeded(name string) { r.forget(name) }

// forget drops name's backoff (it was deleted, or installed).
func (r *retries) forget(name string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropLocked(name)
}

func (r *retries) dropLocked(name string) {
	if e, ok := r.byName[name]; ok {
		r.unindexLocked(name, e.groups)
		delete(r.byName, name)
	}
}

func (r *retries) unindexLocked(name string, groups []string) {
	for _, g := range groups {
		delete(r.byGroup[g], name)
		if len(r.byGroup[g]) == 0 {
			delete(r.byGroup, g)
		}
	}
}

// wake makes name's next reconcile attempt at once, also when the attempt
// under way right now fails (the event that woke it came after what that
// attempt read).
func (r *retries) wake(name string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.byName[name]; ok {
		e.woken = true
	}
}

// wakeGroup wakes the BundleDeployments waiting for a kind of group, and
// returns their names, sorted.
func (r *retries) wakeGroup(group string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.byGroup[group]))
	for name := range r.byGroup[group] {
		r.byName[name].woken, r.byName[name].byCRD = true, true
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// waiting reports how many BundleDeployments back off, and the index's
// entries (for tests of its bound).
func (r *retries) waiting() (names, indexed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.byGroup {
		indexed += len(m)
	}
	return len(r.byName), indexed
}

// noMatch finds the kinds an API server does not serve in error text:
// Kubernetes' RESTMapper says `no matches for kind "Widget" in version
// "widgets.example.com/v1"`, also inside errors only kept as text (Helm's).
var noMatch = regexp.MustCompile(`no matches for kind "[^"]*" in version "([^"/]*)/[^"]*"`)

// missingGroups names the API groups of kinds err says the cluster does
// not serve, sorted, at most maxWaitGroups.
func missingGroups(err error) []string {
	seen := map[string]bool{}
	var nk *meta.NoKindMatchError
	if errors.As(err, &nk) && nk.GroupKind.Group != "" {
		seen[nk.GroupKind.Group] = true
	}
	var nr *meta.NoResourceMatchError
	if errors.As(err, &nr) && nr.PartialResource.Group != "" {
		seen[nr.PartialResource.Group] = true
	}
	for _, m := range noMatch.FindAllStringSubmatch(err.Error(), -1) {
		if len(seen) >= maxWaitGroups {
			break
		}
		seen[m[1]] = true
	}
	groups := make([]string, 0, len(seen))
	for g := range seen {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	if len(groups) > maxWaitGroups {
		groups = groups[:maxWaitGroups]
	}
	return groups
}

// crdGroup is the API group a CRD serves: its name is <plural>.<group>
// (the API server enforces it).
func crdGroup(name string) string {
	if i := strings.IndexByte(name, '.'); i >= 0 {
		return name[i+1:]
	}
	return ""
}

// retryMessage is msg announcing the next attempt.
func retryMessage(msg string, in time.Duration, at time.Time) string {
	return fmt.Sprintf("%s; next attempt in %s at %s", msg, shortDuration(in), at.UTC().Format(time.RFC3339))
}

// shortDuration is d in whole seconds as Go spells durations, without
// zero units at the end ("5m", not "5m0s").
func shortDuration(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

var retryTail = regexp.MustCompile(`; next attempt in ([0-9hms.]+) at (\S+)$`)

// ParseRetry reads back the announcement a failing install's Installed
// condition message ends with: how long the backoff was when announced,
// and when the next attempt is due. ok is false when msg announces none.
func ParseRetry(msg string) (in time.Duration, at time.Time, ok bool) {
	m := retryTail.FindStringSubmatch(msg)
	if m == nil {
		return 0, time.Time{}, false
	}
	in, err := time.ParseDuration(m[1])
	if err != nil {
		return 0, time.Time{}, false
	}
	at, err = time.Parse(time.RFC3339, m[2])
	if err != nil {
		return 0, time.Time{}, false
	}
	return in, at, true
}

// wakingController passes on what its sources enqueue, waking the
// BundleDeployments they name from their backoff first: it wraps the
// controller handed to a WatchingInstaller, whose watches report changes
// to what installs read.
type wakingController struct {
	controller.Controller
	wake func(name string)
}

func (c wakingController) Watch(src source.TypedSource[reconcile.Request]) error {
	if s, ok := src.(source.TypedSyncingSource[reconcile.Request]); ok {
		return c.Controller.Watch(wakingSyncingSource{wakingSource{s, c.wake}, s})
	}
	return c.Controller.Watch(wakingSource{src, c.wake})
}

type wakingSource struct {
	source.TypedSource[reconcile.Request]
	wake func(name string)
}

func (s wakingSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	return s.TypedSource.Start(ctx, wakingQueue{q, s.wake})
}

type wakingSyncingSource struct {
	wakingSource
	syncing source.TypedSyncingSource[reconcile.Request]
}

func (s wakingSyncingSource) WaitForSync(ctx context.Context) error {
	return s.syncing.WaitForSync(ctx)
}

type wakingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	wake func(name string)
}

func (q wakingQueue) Add(req reconcile.Request) {
	q.wake(req.Name)
	q.TypedRateLimitingInterface.Add(req)
}

func (q wakingQueue) AddAfter(req reconcile.Request, d time.Duration) {
	q.wake(req.Name)
	q.TypedRateLimitingInterface.AddAfter(req, d)
}

func (q wakingQueue) AddRateLimited(req reconcile.Request) {
	q.wake(req.Name)
	q.TypedRateLimitingInterface.AddRateLimited(req)
}

// wokenRequests wakes the BundleDeployments reqs name, and returns reqs.
func (r *Reconciler) wokenRequests(reqs []reconcile.Request) []reconcile.Request {
	for _, req := range reqs {
		r.retries.wake(req.Name)
	}
	return reqs
}

// crdWaiters wakes and reconciles the BundleDeployments waiting for a kind
// of the group a created or changed CRD serves (its Established condition
// comes as a change too).
func (r *Reconciler) crdWaiters(_ context.Context, o client.Object) []reconcile.Request {
	g := crdGroup(o.GetName())
	if g == "" {
		return nil
	}
	// Before the wake: the attempts it brings map the group's kinds anew.
	if r.Releases != nil {
		r.Releases.ForgetMissing(g)
	}
	names := r.retries.wakeGroup(g)
	reqs := make([]reconcile.Request, 0, len(names))
	for _, n := range names {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: n}})
	}
	return reqs
}

// cutForRetry keeps msg short enough that the announcement after it
// survives the condition's length limit.
func cutForRetry(msg string) string {
	const limit = 31000
	if len(msg) <= limit {
		return msg
	}
	return strings.ToValidUTF8(msg[:limit], "") + "..."
}

// watchCRDs wakes the BundleDeployments waiting for a kind when a CRD of
// its group is created or changes. Only the CRDs' names and
// resourceVersions are cached (metadata-only watch, trimmed): a CRD's
// schema or a kubectl last-applied annotation can be megabytes.
func (r *Reconciler) watchCRDs(mgr ctrl.Manager, c controller.Controller) error {
	ca, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:           mgr.GetScheme(),
		Mapper:           mgr.GetRESTMapper(),
		HTTPClient:       mgr.GetHTTPClient(),
		DefaultTransform: nameOnly,
	})
	if err != nil {
		return fmt.Errorf("creating cache of CRD names: %w", err)
	}
	if err := mgr.Add(ca); err != nil {
		return err
	}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	src := source.Kind[client.Object](ca, crd, handler.EnqueueRequestsFromMapFunc(r.crdWaiters), predicate.Funcs{
		// Created, or changed (Established comes as a status change);
		// the initial list at start has no one waiting.
		DeleteFunc: func(event.DeleteEvent) bool { return false },
	})
	if err := c.Watch(src); err != nil {
		return fmt.Errorf("watching CRDs: %w", err)
	}
	return nil
}

// nameOnly keeps of a cached object's metadata its name, namespace and
// resourceVersion.
func nameOnly(in any) (any, error) {
	m, ok := in.(*metav1.PartialObjectMetadata)
	if !ok {
		return in, nil
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta}
	out.Name, out.Namespace, out.ResourceVersion = m.Name, m.Namespace, m.ResourceVersion
	return out, nil
}

func overlaps(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}
