package bundledeployment

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash/maphash"
	"maps"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
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
	"github.com/rukpak-dev/rukpak/internal/freelist"
	"github.com/rukpak-dev/rukpak/internal/jsonmap"
	"github.com/rukpak-dev/rukpak/internal/liststream"
	"github.com/rukpak-dev/rukpak/internal/memomapper"
	"github.com/rukpak-dev/rukpak/provisioner/health"
	"github.com/rukpak-dev/rukpak/provisioner/memo"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// Tracker watches the kinds BundleDeployments installed, so a deleted or
// edited object brings its BundleDeployment back for drift correction and
// health updates. Its cache holds only the metadata of objects labelled as
// installed by a BundleDeployment (metadata-only watches, and of the
// annotations only Helm's ownership ones): memory grows with the number of
// installed objects, not with their size (a CRD's schema can be 1 MB).
//
// Drift correction and health need whole objects: they read one from the
// API server only when its resourceVersion differs from the one last
// judged, and remember the verdict (observed), so a steady state costs no
// reads.
type Tracker struct {
	cache cache.Cache
	// lists and mapper read installed objects in bulk (judgeInBulk).
	lists      *liststream.Client
	mapper     meta.RESTMapper
	controller controller.Controller
	// recordedAt, when set, is release.Manager.RecordedAt: objects of
	// kinds without a status not changed since their release's records
	// were last written are judged from their cached metadata.
	recordedAt func(release string) (uint64, bool)

	mu       sync.Mutex
	watched  map[schema.GroupVersionKind]bool
	observed map[string]map[objectKey]observation
	// specs are where owners' releases last applied their objects that
	// have a generation (Applied).
	specs map[string]map[objectKey]appliedSpec
}

// NewInstalledCache returns the cache of the metadata of installed objects
// (labelled as owned by a BundleDeployment), added to mgr: the trackers of
// every class and the webhook's CRD access (crdaccess) share it, so that
// each kind is watched once, whichever of them needs it (a fleet's CRDs
// were watched twice: every one of their status updates decoded twice).
// Its entries hold what trimMetadata keeps; reads of it must not change
// what they get (no deep copies).
func NewInstalledCache(mgr ctrl.Manager) (cache.Cache, error) {
	owned, err := labels.NewRequirement(rukpakv1alpha1.LabelOwnerKind, selection.Equals, []string{"BundleDeployment"})
	if err != nil {
		return nil, err
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		HTTPClient:           mgr.GetHTTPClient(),
		DefaultLabelSelector: labels.NewSelector().Add(*owned),
		DefaultTransform:     trimMetadata,
		// Every read of it only reads (Metadata and peek hand out a copy
		// of the object's struct whose maps and pointers are the cache's;
		// unfold clones the labels before it changes them): a deep copy
		// per read was ~1 KB for each installed object on every reconcile.
		DefaultUnsafeDisableDeepCopy: ptr(true),
	})
	if err != nil {
		return nil, fmt.Errorf("creating cache of installed objects: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, err
	}
	return c, nil
}

// newTracker returns a tracker reading installed (NewInstalledCache, made
// here when nil).
func newTracker(mgr ctrl.Manager, installed cache.Cache) (*Tracker, error) {
	c := installed
	if c == nil {
		var err error
		if c, err = NewInstalledCache(mgr); err != nil {
			return nil, err
		}
	}
	lists, err := liststream.New(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, err
	}
	return &Tracker{
		cache: c,
		lists: lists,
		// Each read back maps its object's kind: remembered, a map
		// lookup instead of two errors per API group of the cluster.
		mapper:   memomapper.Remembering(mgr.GetRESTMapper()),
		watched:  map[schema.GroupVersionKind]bool{},
		observed: map[string]map[objectKey]observation{},
		specs:    map[string]map[objectKey]appliedSpec{},
	}, nil
}

// trimMetadata keeps of a cached object's metadata only what the tracker
// reads: its name and namespace, resourceVersion, deletionTimestamp, the
// owner labels and Helm's ownership annotations. At 10,000
// BundleDeployments of 10 objects the cache holds 100,000 of these, so
// everything else goes (managedFields, uid, creationTimestamp,
// ownerReferences, finalizers, other labels and annotations: a bundle's
// author chooses their size), and the ownership annotations are kept in
// the labels map (annotatedKey), sparing a second map per object: Metadata
// moves them back. Keys and the owner kind are the package's constants
// rather than copies decoded with every object. Like every transform it
// must give the same result for its own output (client-go may apply it
// twice).
func trimMetadata(in any) (any, error) {
	o, ok := in.(metav1.Object)
	if !ok {
		return in, nil
	}
	m, ok := in.(*metav1.PartialObjectMetadata)
	if !ok {
		o.SetManagedFields(nil)
		var kept map[string]string
		for _, k := range annotatedKeys {
			if v, ok := o.GetAnnotations()[k]; ok {
				if kept == nil {
					kept = map[string]string{}
				}
				kept[k] = v
			}
		}
		o.SetAnnotations(kept)
		return in, nil
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta}
	out.Name, out.Namespace = m.Name, m.Namespace
	out.ResourceVersion = m.ResourceVersion
	out.DeletionTimestamp = m.DeletionTimestamp
	var set labelSet
	if v, ok := m.Labels[rukpakv1alpha1.LabelOwnerKind]; ok {
		if v == "BundleDeployment" {
			v = "BundleDeployment" // the constant, not a decoded copy
		}
		set.values[0], set.has[0] = v, true
	}
	owner, hasOwner := m.Labels[rukpakv1alpha1.LabelOwnerName]
	set.values[1], set.has[1] = owner, hasOwner
	for i, k := range annotatedKeys {
		v, ok := m.Annotations[k]
		if !ok {
			// Already trimmed: client-go may transform an object twice.
			v, ok = m.Labels[annotatedKey(k)]
		}
		if ok {
			if hasOwner && v == owner {
				v = owner // one string for both
			}
			set.values[2+i], set.has[2+i] = v, true
		}
	}
	out.Labels = sharedLabels.get(set)
	return out, nil
}

// labelSet is what trimMetadata keeps of an object's labels: the owner
// kind and name labels and the annotatedKeys, each with whether it is set.
type labelSet struct {
	values [4]string
	has    [4]bool
}

func (s labelSet) labels() map[string]string {
	m := make(map[string]string, 4)
	for i, k := range [4]string{rukpakv1alpha1.LabelOwnerKind, rukpakv1alpha1.LabelOwnerName, annotatedKey(annotatedKeys[0]), annotatedKey(annotatedKeys[1])} {
		if s.has[i] {
			m[k] = s.values[i]
		}
	}
	return m
}

func (s labelSet) bytes() int {
	n := 0
	for _, v := range s.values {
		n += len(v)
	}
	return n
}

// labelMaps hands out one labels map for all the cached objects that keep
// the same labels: the objects of one BundleDeployment usually do, and a
// map is ~340 bytes of a cached object's ~900 (100,000 objects at 10,000
// BundleDeployments of 10). Cached objects are never changed (reads get
// deep copies, event handlers only read them), so sharing is safe. The
// table is bounded in entries and bytes, whoever labels objects: when
// full it starts afresh, and the maps it handed out stay with their
// objects (unshared from then on, as they were before). Full, it holds
// ~8 MiB: 16,384 maps of ~300 bytes, its own slots, and at most 1 MiB of
// values.
type labelMaps struct {
	mu    sync.Mutex
	maps  map[labelSet]map[string]string
	bytes int
}

const (
	maxLabelSets     = 1 << 14
	maxLabelSetBytes = 1 << 20
)

var sharedLabels = &labelMaps{}

func (l *labelMaps) get(s labelSet) map[string]string {
	n := s.bytes()
	if n > maxLabelSetBytes/64 {
		// Too long to keep (a valid name is at most 253 bytes), or to hash
		// under the lock.
		return s.labels()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if m, ok := l.maps[s]; ok {
		return m
	}
	m := s.labels()
	if l.maps == nil || len(l.maps) >= maxLabelSets || l.bytes+n > maxLabelSetBytes {
		l.maps, l.bytes = map[labelSet]map[string]string{}, 0
	}
	l.maps[s] = m
	l.bytes += n
	return m
}

// annotatedKeys are the annotations the tracker keeps: Helm's ownership
// ones (release.Owner).
var annotatedKeys = []string{"meta.helm.sh/release-name", "meta.helm.sh/release-namespace"}

// annotatedKey is where annotation k is kept in a cached object's labels:
// no label key can contain a space.
func annotatedKey(k string) string {
	switch k {
	case annotatedKeys[0]:
		return "annotation meta.helm.sh/release-name"
	case annotatedKeys[1]:
		return "annotation meta.helm.sh/release-namespace"
	}
	return "annotation " + k
}

// unfold moves the annotations trimMetadata kept in m's labels back, in a
// copy of the labels: cached objects share their labels maps.
func unfold(m *metav1.PartialObjectMetadata) {
	m.Labels = maps.Clone(m.Labels)
	for _, k := range annotatedKeys {
		v, ok := m.Labels[annotatedKey(k)]
		if !ok {
			continue
		}
		delete(m.Labels, annotatedKey(k))
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[k] = v
	}
}

// objectKey names one installed object: a hash of its kind, namespace and
// name, 8 bytes per verdict instead of five strings (there is one verdict
// per installed object: 100,000 at 10,000 BundleDeployments of 10). Two
// objects of one owner colliding is harmless: a verdict is used only at
// the resourceVersion it was made at, and no two objects share one (it is
// the etcd revision of the object's last write), so a collision costs a
// read, never a wrong verdict.
type objectKey uint64

// keySeed seeds objectKey's hash, this process's own.
var keySeed = maphash.MakeSeed()

func keyOf(o *unstructured.Unstructured) objectKey {
	return keyOfParts(o.GroupVersionKind(), o.GetNamespace(), o.GetName())
}

func keyOfParts(gvk schema.GroupVersionKind, namespace, name string) objectKey {
	var h maphash.Hash
	h.SetSeed(keySeed)
	for _, s := range []string{gvk.Group, gvk.Version, gvk.Kind, namespace, name} {
		_, _ = h.WriteString(s)
		_ = h.WriteByte(0)
	}
	return objectKey(h.Sum64())
}

// observation is the verdict on one installed object at one
// resourceVersion.
type observation struct {
	resourceVersion string
	// unhealthy is the health of a verdict that is not ready; nil is
	// ready, whose reason is shown nowhere. A verdict is kept per
	// installed object: 32 bytes rather than 72 with the Result inline.
	unhealthy *health.Result
	drifted   bool
	// applied: the verdict is the answer of this process's own apply
	// (Applied), not of a read.
	applied bool
}

// health is the verdict's health.
func (o observation) health() health.Result {
	if o.unhealthy == nil {
		return health.Result{Ready: true}
	}
	return *o.unhealthy
}

// Watch makes sure changes to objects of each kind in objs are seen.
func (t *Tracker) Watch(objs []*unstructured.Unstructured) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if t.watched[gvk] {
			continue
		}
		src := source.Kind[client.Object](t.cache, metadataOf(gvk), handler.EnqueueRequestsFromMapFunc(ownerRequest), notInitialList, t.notOwnWrite())
		if err := t.controller.Watch(src); err != nil {
			return fmt.Errorf("watching %s: %w", gvk, err)
		}
		t.watched[gvk] = true
	}
	return nil
}

// notInitialList drops the creates of a new watch's initial list: a kind is
// watched before the reconcile that needs it reads its objects from the
// synced cache, and every owner is reconciled anyway (at start, from its
// own initial list), so those events would only reconcile every owner of
// the kind once more (after a restart: once more per kind, reading each
// release's history again).
var notInitialList = predicate.Funcs{CreateFunc: func(e event.CreateEvent) bool { return !e.IsInInitialList }}

// notOwnWrite drops the creates and updates that this process's own
// applies answered (Applied, restored): the object is as applied, which
// its owner's verdict already says, so they would only reconcile the
// owner once more (reading its release history again). Deletions always
// pass.
func (t *Tracker) notOwnWrite() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return !t.ownWrite(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool { return !t.ownWrite(e.ObjectNew) },
	}
}

// ownWrite reports whether o (cached metadata) is at the resourceVersion
// an apply of its owner's release answered for it.
func (t *Tracker) ownWrite(o client.Object) bool {
	if o == nil || !o.GetDeletionTimestamp().IsZero() {
		return false
	}
	l := o.GetLabels()
	owner := l[rukpakv1alpha1.LabelOwnerName]
	if l[rukpakv1alpha1.LabelOwnerKind] != "BundleDeployment" || owner == "" {
		return false
	}
	gvk := o.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" {
		return false
	}
	key := keyOfParts(gvk, o.GetNamespace(), o.GetName())
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.observed[owner][key]
	return ok && v.applied && v.resourceVersion == o.GetResourceVersion()
}

func metadataOf(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}

// Metadata reads want's live metadata from the cache.
func (t *Tracker) Metadata(ctx context.Context, want *unstructured.Unstructured) (*metav1.PartialObjectMetadata, error) {
	m, err := t.peek(ctx, want)
	if err != nil {
		return nil, err
	}
	unfold(m)
	return m, nil
}

// peek reads want's cached metadata as the cache keeps it (trimMetadata):
// for its resourceVersion and deletion timestamp. Its labels map is the
// cache's, never to be changed.
func (t *Tracker) peek(ctx context.Context, want *unstructured.Unstructured) (*metav1.PartialObjectMetadata, error) {
	m := metadataOf(want.GroupVersionKind())
	if err := t.cache.Get(ctx, client.ObjectKeyFromObject(want), m); err != nil {
		return nil, err
	}
	return m, nil
}

// Observe judges want's live object, whose cached metadata is m (nil when
// the cache does not have it): whether it drifted from want, and its
// health. The live object is read from the API server only if owner's last
// verdict on it was at another resourceVersion, or the cache does not have
// it and the verdict is not the answer of this release's apply (Applied):
// right after an install the cache usually lags, and otherwise drift
// correction, which runs first, has just restored an object the cache
// lacks.
func (t *Tracker) Observe(ctx context.Context, owner string, want *unstructured.Unstructured, m *metav1.PartialObjectMetadata) (observation, error) {
	key := keyOf(want)
	t.mu.Lock()
	o, ok := t.observed[owner][key]
	t.mu.Unlock()
	if ok && (m != nil && o.resourceVersion == m.ResourceVersion || m == nil && o.applied) {
		return o, nil
	}
	if m != nil && t.unchangedSinceRecorded(owner, want, m) {
		// As the apply before that write left it: no read (after a
		// restart, one GET per installed object otherwise).
		o = observation{resourceVersion: m.ResourceVersion}
		t.remember(owner, key, o)
		return o, nil
	}
	live, err := t.read(ctx, want)
	if err != nil {
		return observation{}, err
	}
	o = judge(want, live, false)
	t.remember(owner, key, o)
	return o, nil
}

// maxLiveObjectBytes bounds an installed object read back whole. etcd
// holds objects of at most 1.5 MiB by default, which JSON with managed
// fields makes a few times larger; the read is transient.
const maxLiveObjectBytes = 16 << 20

// read reads want's live object from the API server, decoded as listed
// objects are (eachLive): without managedFields, which neither drift nor
// health reads and which are as large as the fields applied.
func (t *Tracker) read(ctx context.Context, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvk := want.GroupVersionKind()
	mapping, err := t.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	namespace := ""
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		namespace = want.GetNamespace()
	}
	buf := liveBuffers.Get()
	defer func() {
		if cap(*buf) <= maxPooledLive {
			*buf = (*buf)[:0]
			liveBuffers.Put(buf)
		}
	}()
	*buf, err = t.lists.AppendObject(ctx, (*buf)[:0], mapping.Resource, namespace, want.GetName(), maxLiveObjectBytes)
	if err != nil {
		return nil, err
	}
	// The decoded object shares no bytes with the buffer.
	return decodeLive(jsonmap.UnmarshalLive, *buf, gvk)
}

// liveBuffers are the buffers installed objects are read back into, one
// per read at a time; those of at most maxPooledLive are kept.
var liveBuffers = freelist.New(4, func() *[]byte { b := make([]byte, 0, 32<<10); return &b })

const maxPooledLive = 1 << 20

func (t *Tracker) remember(owner string, key objectKey, o observation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.observed[owner] == nil {
		t.observed[owner] = map[objectKey]observation{}
	}
	t.observed[owner][key] = o
}

// unchangedSinceRecorded reports whether want's live object, of a kind
// without a status, has not been written since owner's release records
// were: the records are written after the release's objects are applied
// (release.Manager.Apply), so such an object is as applied, present and
// ready. Its cached metadata may lag, which errs towards an older
// version; the event of the newer one brings the owner back.
func (t *Tracker) unchangedSinceRecorded(owner string, want *unstructured.Unstructured, m *metav1.PartialObjectMetadata) bool {
	if t.recordedAt == nil || !health.StatusLess(want.GroupVersionKind().GroupKind()) || !m.DeletionTimestamp.IsZero() {
		return false
	}
	rv, err := strconv.ParseUint(m.ResourceVersion, 10, 64)
	if err != nil {
		return false
	}
	recorded, ok := t.recordedAt(owner)
	return ok && rv < recorded
}

// Applied records the verdicts res's applies answered for owner's objects
// of kinds without a status (health.StatusLess): at the resourceVersion an
// apply answered with, the object exists and holds what was applied, so it
// has not drifted and is ready; reading it back (one GET per object right
// after every install, issue 15) would say no more. Objects of kinds with
// a status are judged from a read, as before. Call after Forget.
//
// A CRD the apply read Established, as applied (release.Applied), is
// judged there likewise: ready and not drifted.
//
// Of objects of kinds whose generation follows their fields it also
// records where the apply left them (appliedSpec): while an object keeps
// that UID and generation, its fields other than metadata and status are
// as applied, so judging it again needs only its metadata and status
// (eachLive).
func (t *Tracker) Applied(owner string, res *release.Result) {
	// A CRD's digest (megabytes of schema hashed) outside the lock, which
	// every watch event of the fleet takes.
	digests := map[objectKey][sha256.Size]byte{}
	for _, want := range res.Objects {
		if at, ok := res.AppliedAt(want); ok && tracksSpec(want, at) && isCRD(want.GroupVersionKind()) {
			digests[keyOf(want)] = specDigest(want)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, want := range res.Objects {
		at, ok := res.AppliedAt(want)
		if !ok {
			continue
		}
		t.appliedLocked(owner, want, at, digests)
	}
}

// restored records where the apply restoring want left it (as Applied).
func (t *Tracker) restored(owner string, want *unstructured.Unstructured, at release.Applied) {
	var digests map[objectKey][sha256.Size]byte
	if tracksSpec(want, at) && isCRD(want.GroupVersionKind()) {
		digests = map[objectKey][sha256.Size]byte{keyOf(want): specDigest(want)}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.appliedLocked(owner, want, at, digests)
}

func (t *Tracker) appliedLocked(owner string, want *unstructured.Unstructured, at release.Applied, digests map[objectKey][sha256.Size]byte) {
	key := keyOf(want)
	if tracksSpec(want, at) {
		if t.specs == nil {
			t.specs = map[string]map[objectKey]appliedSpec{}
		}
		if t.specs[owner] == nil {
			t.specs[owner] = map[objectKey]appliedSpec{}
		}
		// A CRD's digest: the preflight asks whether a bundle's CRD is the
		// live one (sameAsLive), and the bundle's may not be this release's.
		t.specs[owner][key] = appliedSpec{uid: at.UID, generation: at.Generation, digest: digests[key]}
	} else {
		delete(t.specs[owner], key)
	}
	rv := at.ResourceVersion
	switch {
	case at.Established != "":
		// A CRD read Established as applied: ready and not drifted there.
		rv = at.Established
	case rv == "" || !health.StatusLess(want.GroupVersionKind().GroupKind()):
		return
	}
	if t.observed[owner] == nil {
		t.observed[owner] = map[objectKey]observation{}
	}
	t.observed[owner][key] = observation{resourceVersion: rv, applied: true}
}

// tracksSpec says whether where the apply left want (at) is recorded as an
// appliedSpec: for the kinds generationFollowsSpec names, answered with a
// UID and a generation.
func tracksSpec(want *unstructured.Unstructured, at release.Applied) bool {
	return at.Generation > 0 && at.UID != "" && generationFollowsSpec(want.GroupVersionKind().GroupKind())
}

// generationFollowsSpec says whether the API server sets the generation of
// a new object of gk itself and moves it with every change of its fields
// other than metadata and status. Other kinds keep the generation a
// client created them with and never move it (Services, say), and a
// custom resource's stored fields can change without it (its CRD's
// schema prunes and defaults them as they are read, a conversion webhook
// rewrites them): those are always compared whole.
func generationFollowsSpec(gk schema.GroupKind) bool {
	switch gk.Group {
	case "apiextensions.k8s.io":
		return gk.Kind == "CustomResourceDefinition"
	case "apps":
		return gk.Kind == "Deployment" || gk.Kind == "StatefulSet" || gk.Kind == "DaemonSet" || gk.Kind == "ReplicaSet"
	case "batch":
		return gk.Kind == "Job" || gk.Kind == "CronJob"
	case "policy":
		return gk.Kind == "PodDisruptionBudget"
	}
	return false
}

// appliedSpec is where this process's apply of an owner's release left one
// of its objects of a kind whose generation follows its fields
// (generationFollowsSpec): while the live object has this UID and
// generation, its fields other than metadata and status are exactly as
// applied.
type appliedSpec struct {
	uid        types.UID
	generation int64
	// digest is specDigest of what was applied, for a CRD.
	digest [sha256.Size]byte
}

// specsOf returns where owner's release last applied those of wanted it
// applied, and that keep must be true of (nil: all).
func (t *Tracker) specsOf(owner string, wanted map[objectKey]*unstructured.Unstructured, keep func(want *unstructured.Unstructured, s appliedSpec) bool) map[objectKey]appliedSpec {
	t.mu.Lock()
	var found map[objectKey]appliedSpec
	for key := range wanted {
		if s, ok := t.specs[owner][key]; ok {
			if found == nil {
				found = map[objectKey]appliedSpec{}
			}
			found[key] = s
		}
	}
	t.mu.Unlock()
	if keep != nil {
		for key, s := range found {
			if !keep(wanted[key], s) {
				delete(found, key)
			}
		}
	}
	return found
}

// specDigest is the digest of o without its metadata and status.
func specDigest(o *unstructured.Unstructured) [sha256.Size]byte {
	rest := make(map[string]any, len(o.Object))
	for k, v := range o.Object {
		if k != "metadata" && k != "status" {
			rest[k] = v
		}
	}
	return memo.Digest([]*unstructured.Unstructured{{Object: rest}})
}

func isCRD(gvk schema.GroupVersionKind) bool {
	return gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition"
}

// Forget drops owner's verdicts: its release changed, and with it what
// drifted means.
func (t *Tracker) Forget(owner string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.observed, owner)
	delete(t.specs, owner)
}

func ownerRequest(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[rukpakv1alpha1.LabelOwnerKind] != "BundleDeployment" || l[rukpakv1alpha1.LabelOwnerName] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: l[rukpakv1alpha1.LabelOwnerName]}}}
}

// Deleter deletes an object only if it carries a release's ownership
// metadata (release.Manager).
type Deleter interface {
	DeleteIfOwned(ctx context.Context, o *unstructured.Unstructured, release string) (kept string, err error)
}

// DeleteOwned deletes every object of a watched kind still labelled as
// installed by the BundleDeployment named owner and carrying its release's
// ownership metadata, and reports how many it deleted and which it left
// alone: the owner label alone is anyone's to set, and an object labelled
// for owner may belong to another release now. It backs up an uninstall
// that failed part-way (whose release record may already be gone) and
// clusters without a garbage collector.
func (t *Tracker) DeleteOwned(ctx context.Context, d Deleter, owner string) (int, []string, error) {
	t.Forget(owner)
	t.mu.Lock()
	gvks := make([]schema.GroupVersionKind, 0, len(t.watched))
	for gvk := range t.watched {
		gvks = append(gvks, gvk)
	}
	t.mu.Unlock()
	deleted := 0
	var kept []string
	for _, gvk := range gvks {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := t.cache.List(ctx, list, client.MatchingLabels{
			rukpakv1alpha1.LabelOwnerKind: "BundleDeployment",
			rukpakv1alpha1.LabelOwnerName: owner,
		}); err != nil {
			return deleted, kept, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		for _, m := range list.Items {
			if !m.GetDeletionTimestamp().IsZero() {
				continue
			}
			o := &unstructured.Unstructured{}
			o.SetGroupVersionKind(gvk)
			o.SetNamespace(m.GetNamespace())
			o.SetName(m.GetName())
			k, err := d.DeleteIfOwned(ctx, o, owner)
			if err != nil {
				return deleted, kept, err
			}
			if k != "" {
				kept = append(kept, k)
				continue
			}
			deleted++
		}
	}
	return deleted, kept, nil
}
