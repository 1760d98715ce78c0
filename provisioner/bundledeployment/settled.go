package bundledeployment

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/health"
)

// A BundleDeployment whose last reconcile installed its Bundle, kept every
// object and left nothing to pivot is settled: until its inputs change, a
// reconcile has nothing to decode, render, check or apply, only verdicts
// to take. Most reconciles of an installed fleet are of this kind: an
// object's status moved (a Deployment became Available), which queues its
// owner. Each one used to decode the whole content again (2.4 of the
// 2.7 MB an unchanged reconcile of a real operator allocated) to compare
// with objects that, but for their status, had not changed.
//
// A settled reconcile (settledHealth) judges each installed object from
// the verdict the tracker holds at its cached resourceVersion; an object
// of a kind whose generation follows its fields (generationFollowsSpec)
// that still has the applied UID and generation is read and judged by its
// labels, annotations and status alone, as the full path would. Anything
// else (an object gone or changed in its fields, a drifted verdict, other
// inputs) goes the full way.

// settledKey is what a settled reconcile's inputs are: the
// BundleDeployment's spec (generation), labels and annotations (approval,
// reconcile requests), its Bundle as the cache has it (spec and status),
// and the release's records (someone else's write of one).
type settledKey struct {
	uid        types.UID
	generation int64
	meta       [sha256.Size]byte
	bundle     types.UID
	bundleRV   string
	records    string
}

// settledObject is one installed object, as little of it as judging it
// again needs.
type settledObject struct {
	gvk             *schema.GroupVersionKind // interned
	namespace, name string
	// want, for the kinds generationFollowsSpec names: apiVersion, kind,
	// metadata (name, namespace, labels, annotations) and a workload's
	// spec.selector (podReason); nil for other kinds, whose changes go the
	// full way.
	want *unstructured.Unstructured
}

// skeleton is o with only what peek, describe and judge's metadata need.
func (o *settledObject) skeleton() *unstructured.Unstructured {
	if o.want != nil {
		return o.want
	}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(*o.gvk)
	u.SetNamespace(o.namespace)
	u.SetName(o.name)
	return u
}

type settledState struct {
	key settledKey
	// status is the digest of bd's status as written when it settled,
	// Healthy aside: a settled reconcile sets only Healthy, so any other
	// difference (a write that failed, someone else's) goes the full way.
	status  [sha256.Size]byte
	renewAt time.Time
	objects []settledObject
	bytes   int64
}

// maxSettledBytes bounds what all settled BundleDeployments of a class
// hold together, as settledBytes estimates it: past it a BundleDeployment
// is not settled, and its reconciles go the full way as they always did.
// Labels and annotations are the bundle author's, so they are counted.
const maxSettledBytes = 32 << 20

// maxSettledKinds bounds the kinds interned; past it each object holds its
// own.
const maxSettledKinds = 1024

// settledSet holds the settled BundleDeployments of one class.
type settledSet struct {
	mu     sync.Mutex
	byName map[string]*settledState
	bytes  int64
	kinds  map[schema.GroupVersionKind]*schema.GroupVersionKind
}

func newSettledSet() *settledSet {
	return &settledSet{byName: map[string]*settledState{}, kinds: map[schema.GroupVersionKind]*schema.GroupVersionKind{}}
}

func (s *settledSet) get(name string) (*settledState, bool) {
	if s == nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.byName[name]
	return st, ok
}

func (s *settledSet) forget(name string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetLocked(name)
}

func (s *settledSet) forgetLocked(name string) {
	if st, ok := s.byName[name]; ok {
		s.bytes -= st.bytes
		delete(s.byName, name)
	}
}

// put settles name with objs (the installed objects, stamped), unless that
// would hold more than maxSettledBytes.
func (s *settledSet) put(name string, key settledKey, status [sha256.Size]byte, renewAt time.Time, objs []*unstructured.Unstructured) {
	if s == nil {
		return
	}
	if !slices.ContainsFunc(objs, hasStatus) {
		// Objects without a status change only in their fields, which
		// goes the full way: nothing to gain from holding them.
		s.forget(name)
		return
	}
	st := &settledState{key: key, status: status, renewAt: renewAt, objects: make([]settledObject, len(objs))}
	st.bytes = 256 + int64(len(name))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetLocked(name)
	for i, o := range objs {
		gvk := o.GroupVersionKind()
		interned, ok := s.kinds[gvk]
		if !ok {
			interned = &gvk
			if len(s.kinds) < maxSettledKinds {
				s.kinds[gvk] = interned
			}
		}
		st.objects[i] = settledObject{gvk: interned, namespace: o.GetNamespace(), name: o.GetName()}
		st.bytes += 96 + int64(len(o.GetNamespace())+len(o.GetName()))
		if generationFollowsSpec(gvk.GroupKind()) {
			st.objects[i].want = skeletonOf(o)
			st.bytes += skeletonBytes(st.objects[i].want)
		}
		if s.bytes+st.bytes > maxSettledBytes {
			return
		}
	}
	s.byName[name] = st
	s.bytes += st.bytes
}

// hasStatus: o is of a kind whose status may change while its fields do
// not, which queues its owner.
func hasStatus(o *unstructured.Unstructured) bool {
	return !health.StatusLess(o.GroupVersionKind().GroupKind())
}

// skeletonBytes estimates what holding the skeleton u costs: its maps, and
// the labels, annotations and selector the bundle's author chose.
func skeletonBytes(u *unstructured.Unstructured) int64 {
	n := int64(1024)
	for _, m := range []map[string]string{u.GetLabels(), u.GetAnnotations()} {
		for k, v := range m {
			n += 64 + int64(len(k)+len(v))
		}
	}
	if sel, ok, _ := unstructured.NestedMap(u.Object, "spec", "selector"); ok {
		n += 512 + int64(len(fmt.Sprint(sel)))
	}
	return n
}

// skeletonOf is o's apiVersion, kind, metadata as drift is judged by it
// (name, namespace, labels, annotations) and a workload's spec.selector.
func skeletonOf(o *unstructured.Unstructured) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(o.GroupVersionKind())
	u.SetNamespace(o.GetNamespace())
	u.SetName(o.GetName())
	if l := o.GetLabels(); len(l) > 0 {
		u.SetLabels(l)
	}
	if a := o.GetAnnotations(); len(a) > 0 {
		u.SetAnnotations(a)
	}
	if sel, ok, _ := unstructured.NestedFieldCopy(o.Object, "spec", "selector"); ok {
		_ = unstructured.SetNestedField(u.Object, sel, "spec", "selector")
	}
	return u
}

// settledKeyOf is bd's settled key with its Bundle b; ok is false when the
// release's records are not known (the informer has not shown them yet).
func (r *Reconciler) settledKeyOf(bd *rukpakv1alpha1.BundleDeployment, b *rukpakv1alpha1.Bundle) (settledKey, bool) {
	records, ok := r.Releases.Fingerprint(bd.Name)
	if !ok {
		return settledKey{}, false
	}
	return settledKeyWith(bd, b, records), true
}

// settledKeyWith is bd's settled key with its Bundle b and release records
// of fingerprint records.
func settledKeyWith(bd *rukpakv1alpha1.BundleDeployment, b *rukpakv1alpha1.Bundle, records string) settledKey {
	h := sha256.New()
	for _, m := range []map[string]string{bd.Labels, bd.Annotations} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			h.Write([]byte(k))
			h.Write([]byte{0})
			h.Write([]byte(m[k]))
			h.Write([]byte{0})
		}
		h.Write([]byte{1})
	}
	key := settledKey{uid: bd.UID, generation: bd.Generation, bundle: b.UID, bundleRV: b.ResourceVersion, records: records}
	h.Sum(key.meta[:0])
	return key
}

// settles says whether bd's reconciles may go the settled way at all: its
// objects are installed by this class's own release manager (a chart's
// installs read values from other objects, which a settled reconcile
// would not read again), as the provisioner (a ServiceAccount's rights may
// change without an event), from a template without a catalog source
// (whose resolution may change).
func (r *Reconciler) settles(bd *rukpakv1alpha1.BundleDeployment) bool {
	if r.Installer != nil || r.Releases == nil || bd.Spec.Template.Spec.Source.Type == rukpakv1alpha1.SourceTypeCatalog {
		return false
	}
	if r.Identity != nil {
		if _, named, err := r.Identity.Policy.For(bd); err != nil || named {
			return false
		}
	}
	return true
}

// settleCandidate is what a full reconcile that installed bundle and kept
// every object leaves for settle: objs (stamped), when to look again
// (renewAt), and the release's records as the install found them or, if
// it wrote them, left them.
type settleCandidate struct {
	bundle  *rukpakv1alpha1.Bundle
	objs    []*unstructured.Unstructured
	renewAt time.Time
	records string
}

// recordsOf is the fingerprint of bd's release records, if bd may settle
// and it is known.
func (r *Reconciler) recordsOf(bd *rukpakv1alpha1.BundleDeployment) (string, bool) {
	if !r.settles(bd) {
		return "", false
	}
	return r.Releases.Fingerprint(bd.Name)
}

// settle records bd as settled after a full reconcile left c, once bd's
// status is written, with the release records as the install found or
// left them: the informer need not show its writes yet (later reconciles
// find them so and go the settled way), and a record someone else wrote,
// then or later, makes the records differ from the key's (versions are
// the API server's), so the reconcile its event brings goes the full way.
//
// started is bd's key as the reconcile began (its UID, generation, labels
// and annotations): a spec, label or annotation change that the status
// write's answer brought into bd was not installed, so bd does not settle
// on it (its event's reconcile goes the full way).
func (r *Reconciler) settle(bd *rukpakv1alpha1.BundleDeployment, c *settleCandidate, started settledKey) {
	if c.objs == nil {
		// A settled reconcile (which leaves the state as it is), or a
		// full one that did not settle (which forgot it first).
		return
	}
	key := settledKeyWith(bd, c.bundle, c.records)
	if !r.settles(bd) || bd.Status.PendingBundle != "" || bd.Status.ObservedGeneration != bd.Generation ||
		key.uid != started.uid || key.generation != started.generation || key.meta != started.meta {
		r.settled.forget(bd.Name)
		return
	}
	r.settled.put(bd.Name, key, statusDigest(bd), c.renewAt, c.objs)
}

// statusDigest is the digest of bd's status without its Healthy condition.
func statusDigest(bd *rukpakv1alpha1.BundleDeployment) [sha256.Size]byte {
	st := bd.Status
	st.Conditions = slices.DeleteFunc(slices.Clone(st.Conditions), func(c metav1.Condition) bool { return c.Type == rukpakv1alpha1.TypeHealthy })
	data, err := json.Marshal(st)
	if err != nil {
		return [sha256.Size]byte{} // matches nothing written
	}
	return sha256.Sum256(data)
}

// settledHealth is the reconcile of a settled bd whose inputs are as it
// settled with (b its Bundle): the Healthy condition from the verdicts on
// its objects, nothing else. ok is false when bd must go the full way.
func (r *Reconciler) settledHealth(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, b *rukpakv1alpha1.Bundle) (res ctrl.Result, ok bool) {
	st, found := r.settled.get(bd.Name)
	if !found || !r.settles(bd) || bd.Status.ActiveBundle != b.Name || bd.Status.PendingBundle != "" || bd.Status.ObservedGeneration != bd.Generation {
		return res, false
	}
	now := time.Now()
	if !st.renewAt.IsZero() && !now.Before(st.renewAt) {
		return res, false
	}
	if key, ok := r.settledKeyOf(bd, b); !ok || key != st.key || statusDigest(bd) != st.status {
		return res, false
	}
	if owned, err := r.ownedBundles(ctx, bd); err != nil || len(owned) != 1 || owned[0].Name != b.Name {
		return res, false // a Bundle to delete, or to wait for
	}
	var bad, whats []string
	for i := range st.objects {
		o := &st.objects[i]
		want := o.skeleton()
		obs, ok := r.tracker.settledVerdict(ctx, bd.Name, want, o.want != nil)
		if !ok || obs.drifted {
			return res, false
		}
		bad, whats = r.noteHealth(ctx, bd.Name, want, obs, bad, whats)
	}
	sort.Strings(bad)
	sort.Strings(whats)
	return requeueBy(r.reportHealth(bd, bad, whats), st.renewAt, now), true
}

// settledVerdict is the verdict on want's live object for a settled
// reconcile: the one held at its cached resourceVersion or, for an object
// whose fields other than metadata and status are as applied (trusted:
// want is its skeleton), a new one from reading it. ok is false when only
// the full way can tell.
func (t *Tracker) settledVerdict(ctx context.Context, owner string, want *unstructured.Unstructured, trusted bool) (observation, bool) {
	m, err := t.peek(ctx, want)
	if err != nil || !m.DeletionTimestamp.IsZero() {
		return observation{}, false
	}
	key := keyOf(want)
	t.mu.Lock()
	o, known := t.observed[owner][key]
	spec, applied := t.specs[owner][key]
	t.mu.Unlock()
	if known && o.resourceVersion == m.ResourceVersion {
		return o, true
	}
	// (The cache keeps no UID or generation: trimMetadata.)
	if !trusted || !applied {
		return observation{}, false
	}
	live, err := t.read(ctx, want)
	if err != nil {
		return observation{}, false
	}
	if live.GetUID() != spec.uid || live.GetGeneration() != spec.generation || live.GetDeletionTimestamp() != nil {
		return observation{}, false
	}
	o = judge(want, live, true)
	t.remember(owner, key, o)
	return o, true
}
