package release

import (
	"cmp"
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// recordIndex says which record Secrets each release has, so reading one
// release's history costs a GET per record instead of a LIST by label
// selector: the API server answers such a LIST by matching every record
// Secret of the namespace (one per installed BundleDeployment, more with
// history), so N installs cost it O(N²) (issue 15).
//
// It is a metadata-only informer on the namespace's Secrets labelled
// owner=helm (Helm's records and our chunked records' indexes; chunks carry
// no owner label), keeping of each only its name and its "name" label,
// indexed by that label; plus the keys this process created that the
// informer has not shown yet, since the next reconcile reads the history
// right after a write. A key the index names that is gone by the time it
// is read is skipped, as Query skips a record deleted since its LIST. Until
// the informer has synced (after a start, records written by a previous
// process included), Query lists as before. Records written by another
// process show up with the informer's delay, as every cached read in a
// controller does; one writer per release is assumed anyway (Manager).
type recordIndex struct {
	informer  cache.SharedIndexInformer
	namespace string
	started   atomic.Bool // run, or to be run (Manager.AddTo)
	gaveUp    atomic.Bool // waitSynced timed out

	mu      sync.Mutex
	created map[string]map[string]bool // release name → record keys
	// writes are the record writes of the Apply under way for a release
	// (track), so that once it has succeeded the release's fingerprint can
	// be told before the informer shows it (settle).
	writes map[string]*recordWrites
	// deleted are the records this process deleted that the informer
	// may still show: their labels no longer vouch for anything
	// (deployedHolds). Each goes when the informer shows its deletion.
	deleted map[deletedRecord]struct{}
	// own are the record versions this process wrote that the informer
	// has not shown yet (key → version): what the informer shows up to
	// them is this process's doing, anything else someone else's.
	own map[string]ownWrite
	// listeners are told the release of every record someone else wrote
	// or deleted (OnChange), once pending changes have waited out the
	// grace in which this process's own writes are told apart (check).
	listeners []func(release string)
	awaiting  map[string][]change
	// schedule runs check(release) after ownWriteGrace (afterGrace;
	// tests run it themselves).
	schedule func(release string)
}

// ownWrite is a record version this process wrote.
type ownWrite struct {
	uid types.UID
	rv  string
}

// maxOwnNoted bounds the own writes noted; past it they are all forgotten
// (at worst, a write of this process is taken for someone else's once).
const maxOwnNoted = 4096

// recordWrites are one Apply's writes of a release's records: what the
// index showed when it began to write, and what each write answered.
type recordWrites struct {
	before map[string]string // key → "uid@resourceVersion"
	wrote  map[string]string // key → "uid@resourceVersion", "" once deleted
	unsure bool              // a write whose outcome is not known
}

const byReleaseName = "release-name"

// recordIndexers index records by their release's name.
var recordIndexers = cache.Indexers{byReleaseName: func(obj any) ([]string, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok || m.Labels["name"] == "" {
		return nil, nil
	}
	return []string{m.Labels["name"]}, nil
}}

func newRecordIndex(mc metadata.Interface, namespace string) *recordIndex {
	inf := metadatainformer.NewFilteredMetadataInformer(mc, corev1.SchemeGroupVersion.WithResource("secrets"), namespace, 0,
		recordIndexers,
		func(o *metav1.ListOptions) { o.LabelSelector = labels.Set{"owner": "helm"}.String() },
	).Informer()
	return indexRecords(inf, namespace)
}

// indexRecords is the index kept by inf, an informer of the record
// Secrets of namespace indexed by recordIndexers, not started yet.
func indexRecords(inf cache.SharedIndexInformer, namespace string) *recordIndex {
	// What the index reads: a Secret's name and the labels that say which
	// revision of which release it records, in which status, holding what
	// (recorded.go). The rest (managed fields, Helm's timestamps, a
	// release's own labels) would only cost memory, a few hundred bytes
	// per record at 10,000 releases.
	_ = inf.SetTransform(func(obj any) (any, error) {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return obj, nil
		}
		kept := make(map[string]string, len(indexedLabels))
		for _, k := range indexedLabels {
			if v, ok := m.Labels[k]; ok {
				kept[k] = v
			}
		}
		return &metav1.PartialObjectMetadata{
			TypeMeta: m.TypeMeta,
			ObjectMeta: metav1.ObjectMeta{
				Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
				Labels: kept,
			},
		}, nil
	})
	x := &recordIndex{informer: inf, namespace: namespace, created: map[string]map[string]bool{}, writes: map[string]*recordWrites{}, deleted: map[deletedRecord]struct{}{}, own: map[string]ownWrite{}, awaiting: map[string][]change{}}
	x.schedule = x.afterGrace
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		// The records listed at a start are no one's change: every
		// BundleDeployment is reconciled after a start anyway.
		AddFunc: func(obj any, initial bool) {
			if !initial {
				x.shown(obj)
			}
		},
		UpdateFunc: x.shownUpdated,
		DeleteFunc: x.shownDeleted,
	})
	return x
}

// OnChange adds fn to what is told the release name of every record write
// or deletion the informer shows that this process did not make (a Helm
// CLI upgrade or rollback, another replica's write, a hand edit), once
// ownWriteGrace has passed since the first such change of that release.
// fn is called from a timer's goroutine and must not block.
func (x *recordIndex) OnChange(fn func(release string)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.listeners = append(x.listeners, fn)
}

// ownWriteGrace is how long a record change the informer shows waits to
// be told apart as this process's own: the informer may show a write
// before the write's own answer has reached this process (wroteAt,
// removed). It also coalesces: a release is told at most once per grace,
// however many records someone writes meanwhile.
const ownWriteGrace = 2 * time.Second

// maxPendingChanges bounds the changes of one release waiting out the
// grace; past it the release is told whatever they were.
const maxPendingChanges = 16

// change is a record write or deletion the informer showed: the record's
// key, UID and resourceVersion. The zero change is nobody's own.
type change struct {
	key     string
	uid     types.UID
	rv      string
	deleted bool
}

// shownUpdated handles the informer showing record obj updated from old.
// A relist (after a watch expired, an API server restart) shows every
// record again unchanged: those are no one's change. A record whose
// release label changed is, for the release it left, a deletion.
func (x *recordIndex) shownUpdated(old, obj any) {
	o, okOld := old.(*metav1.PartialObjectMetadata)
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if okOld && ok && o.UID == m.UID && o.ResourceVersion == m.ResourceVersion {
		return
	}
	x.shown(obj)
	if okOld && ok && o.Labels["name"] != "" && o.Labels["name"] != m.Labels["name"] {
		x.mu.Lock()
		x.deferLocked(o.Labels["name"], change{})
		x.mu.Unlock()
	}
}

// shown handles the informer showing record obj created or updated.
func (x *recordIndex) shown(obj any) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok || m.Labels["name"] == "" {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if c := (change{key: m.Name, uid: m.UID, rv: m.ResourceVersion}); !x.ownLocked(c) {
		x.deferLocked(m.Labels["name"], c)
	}
}

// shownDeleted handles the informer showing record obj deleted.
func (x *recordIndex) shownDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if c := (change{key: m.Name, uid: m.UID, deleted: true}); !x.ownLocked(c) && m.Labels["name"] != "" {
		x.deferLocked(m.Labels["name"], c)
	}
}

// ownLocked reports whether c is this process's own doing, as far as its
// writes' answers have told so far, and forgets the note that says so once
// the informer has shown it. x.mu is held.
func (x *recordIndex) ownLocked(c change) bool {
	if c.deleted {
		r := deletedRecord{c.key, c.uid}
		_, ours := x.deleted[r]
		delete(x.deleted, r)
		if w, ok := x.own[c.key]; ok && w.uid == c.uid {
			delete(x.own, c.key)
		}
		return ours
	}
	w, ok := x.own[c.key]
	if !ok || w.uid != c.uid {
		return false
	}
	switch order := compareVersions(c.rv, w.rv); {
	case order == 0:
		delete(x.own, c.key)
		return true
	case order < 0:
		// A version that a later write of this process replaced:
		// whoever wrote it, the record holds this process's write.
		return true
	default:
		delete(x.own, c.key)
		return false
	}
}

// deferLocked keeps c, a change of release's records not known as this
// process's own, until ownWriteGrace has passed (check). x.mu is held.
func (x *recordIndex) deferLocked(release string, c change) {
	cs := x.awaiting[release]
	switch {
	case len(cs) == 0:
		x.schedule(release)
	case len(cs) >= maxPendingChanges:
		cs[len(cs)-1] = change{}
		return
	}
	x.awaiting[release] = append(cs, c)
}

// afterGrace is schedule's default: check release once the grace has
// passed.
func (x *recordIndex) afterGrace(release string) {
	time.AfterFunc(ownWriteGrace, func() { x.check(release) })
}

// check tells the listeners about release if any of its pending changes
// is still not known as this process's own.
func (x *recordIndex) check(release string) {
	x.mu.Lock()
	cs := x.awaiting[release]
	delete(x.awaiting, release)
	foreign := false
	for _, c := range cs {
		if !x.ownLocked(c) {
			foreign = true
		}
	}
	listeners := x.listeners
	x.mu.Unlock()
	if foreign {
		tell(listeners, release)
	}
}

func tell(listeners []func(string), release string) {
	for _, fn := range listeners {
		fn(release)
	}
}

// compareVersions orders two resourceVersions as the etcd revisions they
// are; one that is not a number is only equal to itself, and otherwise
// taken as newer.
func compareVersions(a, b string) int {
	if a == b {
		return 0
	}
	na, errA := strconv.ParseUint(a, 10, 64)
	nb, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil {
		return 1
	}
	return cmp.Compare(na, nb)
}

// removed notes that this process deleted record key, of UID uid: until
// the informer shows the deletion, the record vouches for nothing
// (deployedHolds), even if the informer shows it only now (it was created
// and deleted before the informer saw it, or a LIST from before the
// delete is served late).
func (x *recordIndex) removed(key string, uid types.UID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.deleted[deletedRecord{key, uid}] = struct{}{}
	delete(x.own, key)
	if len(x.deleted) <= maxDeletedNoted {
		return
	}
	// Notes of records the informer does not show (never showed, or
	// shows under another UID) are forgotten rather than kept forever:
	// what is forgotten is at most a record's chance to vouch a moment
	// before the informer catches up.
	for r := range x.deleted {
		o, ok, err := x.informer.GetStore().GetByKey(x.namespace + "/" + r.name)
		if m, isMeta := o.(*metav1.PartialObjectMetadata); err == nil && (!ok || !isMeta || m.UID != r.uid) {
			delete(x.deleted, r)
		}
	}
}

// deletedRecord is a record this process deleted: its name and UID.
type deletedRecord struct {
	name string
	uid  types.UID
}

// maxDeletedNoted bounds the deletions noted before the notes of records
// the informer does not show are dropped.
const maxDeletedNoted = 1024

// run keeps the index until ctx is done.
func (x *recordIndex) run(ctx context.Context) {
	x.started.Store(true)
	x.informer.RunWithContext(ctx)
}

// indexSyncWait bounds how long an Apply waits for the index to sync: the
// LIST it would send instead costs the API server as much as the
// informer's.
const indexSyncWait = 10 * time.Second

// waitSynced waits, if the index runs, until it has synced (or
// indexSyncWait has passed, or ctx is done): right after a start every
// release is applied at once, and without the index each would list its
// records and read them, though its record's labels could tell that it
// changes nothing (recorded.go).
// Once a wait has timed out, none waits again: an index that cannot sync
// (its LIST refused) must not slow every Apply.
func (x *recordIndex) waitSynced(ctx context.Context) {
	if !x.started.Load() || x.gaveUp.Load() || x.informer.HasSynced() {
		return
	}
	wait, cancel := context.WithTimeout(ctx, indexSyncWait)
	defer cancel()
	if !cache.WaitForCacheSync(wait.Done(), x.informer.HasSynced) && ctx.Err() == nil {
		x.gaveUp.Store(true)
	}
}

// keys returns the record keys of release name, sorted; ok is false while
// the informer has not synced, when only a LIST can answer.
func (x *recordIndex) keys(name string) (keys []string, ok bool) {
	if !x.informer.HasSynced() {
		return nil, false
	}
	objs, err := x.informer.GetIndexer().ByIndex(byReleaseName, name)
	if err != nil {
		return nil, false
	}
	seen := map[string]bool{}
	for _, o := range objs {
		if m, ok := o.(*metav1.PartialObjectMetadata); ok {
			seen[m.Name] = true
		}
	}
	x.mu.Lock()
	for k := range x.created[name] {
		if seen[k] {
			// The informer has it now, and follows it from here on.
			delete(x.created[name], k)
			continue
		}
		seen[k] = true
	}
	if len(x.created[name]) == 0 {
		delete(x.created, name)
	}
	x.mu.Unlock()
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, true
}

// wrote notes that this process created record key of release name.
func (x *recordIndex) wrote(name, key string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.created[name] == nil {
		x.created[name] = map[string]bool{}
	}
	x.created[name][key] = true
}

// gone notes that record key of release name does not exist (a GET found
// nothing): a created key the informer never showed is forgotten.
func (x *recordIndex) gone(name, key string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.created[name], key)
	if len(x.created[name]) == 0 {
		delete(x.created, name)
	}
}

// recordedAt is the highest resourceVersion among release name's records
// (its last record write), as the index has them; ok is false while the
// informer has not synced, while a record this process wrote has not
// shown in it yet, or when a resourceVersion is not a number.
func (x *recordIndex) recordedAt(name string) (rv uint64, ok bool) {
	shown, ok := x.versions(name)
	if !ok || len(shown) == 0 || x.pending(name, shown) {
		return 0, false
	}
	for _, v := range shown {
		_, version, _ := strings.Cut(v, "@")
		n, err := strconv.ParseUint(version, 10, 64)
		if err != nil {
			return 0, false
		}
		rv = max(rv, n)
	}
	return rv, true
}

// fingerprint names the records of release name as the informer has them,
// with their resourceVersions: any write of one (by this process or
// another) changes it. ok is false while the informer has not synced or
// has not shown a record this process created.
func (x *recordIndex) fingerprint(name string) (string, bool) {
	shown, ok := x.versions(name)
	if !ok || x.pending(name, shown) {
		return "", false
	}
	return joinVersions(shown), true
}

// joinVersions is the fingerprint of records given as key →
// "uid@resourceVersion".
func joinVersions(records map[string]string) string {
	parts := make([]string, 0, len(records))
	for k, v := range records {
		parts = append(parts, k+"@"+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// pending reports whether a record this process created for release name
// is not yet among shown (the informer's records of it), and forgets those
// that are: the first reconcile after an install finds the release indexed
// as soon as the informer has shown its record, not only after a history
// read.
func (x *recordIndex) pending(name string, shown map[string]string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.pendingLocked(name, shown)
}

// pendingLocked is pending with x.mu held.
func (x *recordIndex) pendingLocked(name string, shown map[string]string) bool {
	if len(x.created[name]) == 0 {
		return false
	}
	for k := range shown {
		delete(x.created[name], k)
	}
	if len(x.created[name]) == 0 {
		delete(x.created, name)
		return false
	}
	return true
}

// versions are release name's records as the informer has them: key →
// "uid@resourceVersion"; ok is false while it has not synced.
func (x *recordIndex) versions(name string) (map[string]string, bool) {
	if !x.informer.HasSynced() {
		return nil, false
	}
	objs, err := x.informer.GetIndexer().ByIndex(byReleaseName, name)
	if err != nil {
		return nil, false
	}
	v := make(map[string]string, len(objs))
	for _, o := range objs {
		m, ok := o.(*metav1.PartialObjectMetadata)
		if !ok {
			return nil, false
		}
		v[m.Name] = string(m.UID) + "@" + m.ResourceVersion
	}
	return v, true
}

// track begins noting this process's writes of release name's records
// (wroteAt, deletedAt, unsure), until settle or untrack. Calls for one
// release are serialised by the caller (Manager's per-release lock).
func (x *recordIndex) track(name string) {
	before, ok := x.versions(name)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.writes[name] = &recordWrites{before: before, wrote: map[string]string{}, unsure: !ok}
}

// untrack stops noting writes of release name's records.
func (x *recordIndex) untrack(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.writes, name)
}

// wroteAt notes that a write of record key of release name left it at uid
// and resourceVersion rv.
func (x *recordIndex) wroteAt(name, key string, uid types.UID, rv string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.own) >= maxOwnNoted {
		clear(x.own)
	}
	x.own[key] = ownWrite{uid, rv}
	if w := x.writes[name]; w != nil {
		w.wrote[key] = string(uid) + "@" + rv
	}
}

// deletedAt notes that record key of release name was deleted.
func (x *recordIndex) deletedAt(name, key string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if w := x.writes[name]; w != nil {
		w.wrote[key] = ""
	}
}

// unsure notes a write of one of release name's records whose outcome is
// not known (it failed, or went where the index does not look).
func (x *recordIndex) unsure(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if w := x.writes[name]; w != nil {
		w.unsure = true
	}
}

// settle ends the tracking of release name's writes and returns the
// fingerprint its records will have once the informer shows those writes,
// or ok false when that cannot be told: a write went unnoted, or the
// informer shows a record (or a version of one) that neither the writes
// nor what it showed before them account for, which someone else wrote.
// A fingerprint it returns can only match a later one if the records are
// then exactly as this process left them: versions are the API server's.
func (x *recordIndex) settle(name string) (string, bool) {
	now, ok := x.versions(name)
	x.mu.Lock()
	w := x.writes[name]
	delete(x.writes, name)
	x.mu.Unlock()
	if !ok || w == nil || w.unsure {
		return "", false
	}
	return settled(w.before, w.wrote, now)
}

// settled is the fingerprint of records that were before (key →
// "uid@resourceVersion") and then written as wrote ("" for deleted), or ok
// false when now, what the informer shows, holds a record or a version of
// one that neither accounts for. Records written are left out of that
// check: the informer may not show the writes yet, or already a later
// write, which the fingerprint then differs from.
func settled(before, wrote, now map[string]string) (string, bool) {
	expect := make(map[string]string, len(before)+len(wrote))
	for k, v := range before {
		expect[k] = v
	}
	for k, v := range wrote {
		if v == "" {
			delete(expect, k)
			continue
		}
		expect[k] = v
	}
	for k, v := range now {
		if _, ours := wrote[k]; ours {
			continue
		}
		if expect[k] != v {
			return "", false
		}
	}
	return joinVersions(expect), true
}
