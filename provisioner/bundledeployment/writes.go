package bundledeployment

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// API writes per install (issue 15: at most 15 for a 10-object bundle,
// counting the Bundle, its status, the release record and the
// BundleDeployment's status). Every write costs the API server an etcd
// write and every watcher an event, and every write of a BundleDeployment's
// or Bundle's status that the other reconciler watches queues it again. So:
//   - a Bundle this process unpacks is created with its finalizer, instead
//     of the Bundle reconciler adding it in a write of its own;
//   - the first Bundle's creation intent goes in the finalizer's metadata
//     patch, as an annotation, not in a status write of its own
//     (intent.go);
//   - a generated Bundle's UID is recorded in status.generatedBundles with
//     the next status write that has something else to say, not in one of
//     its own: the intent (the name, written before the create) already
//     covers a crash before then (see bundles.go);
//   - a first install emits no event: its Installed condition says all of
//     it (upgrades, failures and deletions keep theirs: history the
//     conditions overwrite);
//   - while a Bundle this process unpacks has not reported yet, a
//     BundleDeployment has nothing new to say: the Bundle reconciler writes
//     its status within a second (Unpacked, or Unpacking for a slower
//     fetch), and that write queues the BundleDeployment again.

// unpacksHere says whether this process's Bundle reconcilers unpack b.
func (r *Reconciler) unpacksHere(b *rukpakv1alpha1.Bundle) bool {
	return slices.Contains(r.BundleClasses, b.Spec.ProvisionerClassName)
}

// withFinalizer gives a Bundle about to be created the finalizer its
// Bundle reconciler would otherwise add first thing, in a write of its own.
// Only for classes this process runs: a Bundle of a class no process runs
// would never lose it.
func (r *Reconciler) withFinalizer(b *rukpakv1alpha1.Bundle) {
	if r.unpacksHere(b) {
		controllerutil.AddFinalizer(b, rukpakv1alpha1.FinalizerDeleteCachedBundle)
	}
}

// notReported says whether b is a Bundle this process unpacks that its
// Bundle reconciler has not written a status for yet.
func (r *Reconciler) notReported(b *rukpakv1alpha1.Bundle) bool {
	return r.unpacksHere(b) && b.Status.ObservedGeneration == 0 && len(b.Status.Conditions) == 0
}

// onlyFillsIntents says whether now differs from persisted (the status the
// API server holds) only by UIDs recorded for Bundles whose intent
// persisted holds, or by the record of the Bundle annotated names (the
// first Bundle's intent, in the annotation: intent.go) and the generation
// observed: not worth a write of its own. The first Bundle's record comes
// with a status that says nothing else only while that Bundle has not
// reported (a report changes HasValidBundle): its report brings the next
// write within a second, and with it observedGeneration (the status intent
// this replaces carried it).
func onlyFillsIntents(persisted, now *rukpakv1alpha1.BundleDeploymentStatus, annotated string) bool {
	intents := map[string]bool{}
	for _, g := range persisted.GeneratedBundles {
		if g.UID == "" {
			intents[g.Name] = true
		}
	}
	if len(intents) == 0 && annotated == "" {
		return false
	}
	masked := now.DeepCopy()
	masked.GeneratedBundles = masked.GeneratedBundles[:0]
	for _, g := range now.GeneratedBundles {
		switch {
		case intents[g.Name]:
			g.UID = ""
		case g.Name == annotated:
			masked.ObservedGeneration = persisted.ObservedGeneration
			continue
		}
		masked.GeneratedBundles = append(masked.GeneratedBundles, g)
	}
	return equality.Semantic.DeepEqual(*persisted, *masked)
}

// persisted returns what the API server holds of bd's
// status.generatedBundles as far as this process knows: what its last
// status write sent, or what it adopted from bd's status.
func (rs *records) persisted(bd *rukpakv1alpha1.BundleDeployment) []rukpakv1alpha1.GeneratedBundle {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.written[bd.UID])
}

// sentStatus is a status this process wrote, and the resourceVersions it
// replaced: a cached BundleDeployment at one of them has not caught up
// with the write yet.
type sentStatus struct {
	replaced []string
	// version is the resourceVersion the write made.
	version string
	status  *rukpakv1alpha1.BundleDeploymentStatus
}

// maxReplaced bounds the resourceVersions remembered per BundleDeployment
// (a reconcile writes its status at most a few times in a row).
const maxReplaced = 8

// wrote notes that a status write, made from resourceVersion from, sent
// bd's status (bd as the API server answered).
func (rs *records) wrote(bd *rukpakv1alpha1.BundleDeployment, from string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.written == nil {
		rs.written = map[types.UID][]rukpakv1alpha1.GeneratedBundle{}
	}
	if rs.sent == nil {
		rs.sent = map[types.UID]sentStatus{}
	}
	rs.written[bd.UID] = slices.Clone(bd.Status.GeneratedBundles)
	replaced := []string{from}
	// Writes in a row: the cache may still be at any version they replaced.
	if prev, ok := rs.sent[bd.UID]; ok && prev.version == from {
		replaced = append(replaced, prev.replaced...)
	}
	if len(replaced) > maxReplaced {
		replaced = replaced[:maxReplaced]
	}
	rs.sent[bd.UID] = sentStatus{replaced: replaced, version: bd.ResourceVersion, status: bd.Status.DeepCopy()}
}

// catchUp gives bd, read from a cache that has not seen this process's last
// status write yet, the status that write sent (its generatedBundles stay
// as load set them): otherwise an unchanged outcome would differ from the
// stale status and be written again, one needless write per install in
// about one of ten under load. A cached BundleDeployment at a version after
// the write, or written by someone else since, keeps its own status.
func (rs *records) catchUp(bd *rukpakv1alpha1.BundleDeployment) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	s, ok := rs.sent[bd.UID]
	if ok && bd.ResourceVersion == s.version {
		// The cache has seen the write, and a cache never goes back to
		// an older version: the copy is of no more use (kept, it was a
		// second copy of every BundleDeployment's status, ~1 KiB each).
		delete(rs.sent, bd.UID)
		return
	}
	if !ok || !slices.Contains(s.replaced, bd.ResourceVersion) {
		return
	}
	generated := bd.Status.GeneratedBundles
	bd.Status = *s.status.DeepCopy()
	bd.Status.GeneratedBundles = generated
}

// bundleOwnerIndex indexes cached Bundles by the BundleDeployment their
// owner labels name: listing a BundleDeployment's Bundles by label selector
// scanned every Bundle in the cache, once or twice per reconcile, which
// made installing N BundleDeployments cost O(N²).
const bundleOwnerIndex = "core.rukpak.io/owner-bundledeployment"

func bundleOwner(o client.Object) []string {
	l := o.GetLabels()
	if l[rukpakv1alpha1.LabelOwnerKind] != "BundleDeployment" || l[rukpakv1alpha1.LabelOwnerName] == "" {
		return nil
	}
	return []string{l[rukpakv1alpha1.LabelOwnerName]}
}

// indexed remembers the managers whose cache has bundleOwnerIndex: every
// class's reconciler shares one cache, which refuses a second index of the
// same name.
var indexed sync.Map

func indexBundles(mgr ctrl.Manager) error {
	if _, done := indexed.LoadOrStore(mgr, true); done {
		return nil
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &rukpakv1alpha1.Bundle{}, bundleOwnerIndex, bundleOwner); err != nil {
		indexed.Delete(mgr)
		return fmt.Errorf("indexing bundles by owner: %w", err)
	}
	return nil
}
