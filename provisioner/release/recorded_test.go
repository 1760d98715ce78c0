package release

import (
	"context"
	"crypto/sha256"
	"strconv"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

func TestObjectsLabel(t *testing.T) {
	objects := sha256.Sum256([]byte("objects"))
	label := objectsLabel("web", 3, 1200, objects)
	if errs := validation.IsValidLabelValue(label); len(errs) > 0 {
		t.Fatalf("%q is not a label value: %v", label, errs)
	}
	if again := objectsLabel("web", 3, 1200, objects); again != label {
		t.Errorf("the same revision labelled %q, then %q", label, again)
	}
	// Each part it binds changes it.
	for what, other := range map[string]string{
		"another release":  objectsLabel("web2", 3, 1200, objects),
		"another revision": objectsLabel("web", 4, 1200, objects),
		"another size":     objectsLabel("web", 3, 1201, objects),
		"other objects":    objectsLabel("web", 3, 1200, sha256.Sum256([]byte("others"))),
		// The parts are separated: "web" revision 31 is not "web3" revision 1.
		"moved separator": objectsLabel("web3", 1, 1200, objects),
	} {
		if other == label {
			t.Errorf("%s: the same label %q", what, label)
		}
	}
	if a, b := objectsLabel("web", 31, 1200, objects), objectsLabel("web3", 1, 1200, objects); a == b {
		t.Errorf("web revision 31 and web3 revision 1 share the label %q", a)
	}
}

// TestDeployedAmong feeds the labels check records as someone with write
// access to the records' namespace might leave them: only the last
// revision, deployed, labelled for exactly its own version, size and
// objects, vouches for them.
func TestDeployedAmong(t *testing.T) {
	objects := sha256.Sum256([]byte("objects"))
	record := func(version int, status string, labels ...string) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{}
		m.Name = recordKey("web", version)
		m.Labels = map[string]string{"name": "web", "version": strconv.Itoa(version), "status": status}
		for i := 0; i+1 < len(labels); i += 2 {
			m.Labels[labels[i]] = labels[i+1]
		}
		return m
	}
	good := func(version int, status string) *metav1.PartialObjectMetadata {
		return record(version, status, labelObjects, objectsLabel("web", version, 500, objects), labelManifestBytes, "500")
	}
	deployed, superseded := helmrelease.StatusDeployed.String(), helmrelease.StatusSuperseded.String()
	for _, tc := range []struct {
		name    string
		records []*metav1.PartialObjectMetadata
		want    int // the version vouched for, 0 for none
	}{
		{"the deployed revision", []*metav1.PartialObjectMetadata{good(1, superseded), good(2, deployed)}, 2},
		{"in any order", []*metav1.PartialObjectMetadata{good(2, deployed), good(1, superseded)}, 2},
		{"no records", nil, 0},
		{"the last revision failed", []*metav1.PartialObjectMetadata{good(1, deployed), good(2, "failed")}, 0},
		{"a pending revision", []*metav1.PartialObjectMetadata{good(2, deployed), good(1, "pending-upgrade")}, 0},
		{"the label copied onto a later revision", []*metav1.PartialObjectMetadata{good(1, superseded),
			record(2, deployed, labelObjects, objectsLabel("web", 1, 500, objects), labelManifestBytes, "500")}, 0},
		{"another size claimed", []*metav1.PartialObjectMetadata{
			record(1, deployed, labelObjects, objectsLabel("web", 1, 500, objects), labelManifestBytes, "501")}, 0},
		{"other objects", []*metav1.PartialObjectMetadata{
			record(1, deployed, labelObjects, objectsLabel("web", 1, 500, sha256.Sum256(nil)), labelManifestBytes, "500")}, 0},
		{"no size", []*metav1.PartialObjectMetadata{record(1, deployed, labelObjects, objectsLabel("web", 1, 500, objects))}, 0},
		{"a negative size", []*metav1.PartialObjectMetadata{
			record(1, deployed, labelObjects, objectsLabel("web", 1, -1, objects), labelManifestBytes, "-1")}, 0},
		{"no labels of ours (written by Helm)", []*metav1.PartialObjectMetadata{record(1, deployed)}, 0},
		{"two records of the last version", []*metav1.PartialObjectMetadata{good(2, deployed), good(1, superseded), good(2, deployed)}, 0},
		{"a version that is no number", []*metav1.PartialObjectMetadata{good(2, deployed), record(1, superseded, "version", "one")}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := deployedAmong("web", objects, tc.records)
			switch {
			case tc.want == 0 && ok:
				t.Errorf("vouched for revision %d, want nothing", r.version)
			case tc.want != 0 && (!ok || r.version != tc.want || r.manifestBytes != 500):
				t.Errorf("got revision %d of %d bytes (%v), want revision %d of 500", r.version, r.manifestBytes, ok, tc.want)
			}
		})
	}
}

// TestDeployedHoldsAfterDelete: a record this process deleted no longer
// vouches for anything while the informer still shows it (right after an
// uninstall, the same objects installed again must be installed), and is
// forgotten once the informer shows the deletion.
func TestDeployedHoldsAfterDelete(t *testing.T) {
	objects := sha256.Sum256([]byte("objects"))
	rec := &metav1.PartialObjectMetadata{}
	rec.Name, rec.Namespace, rec.UID, rec.ResourceVersion = recordKey("web", 1), "system", "uid-1", "10"
	rec.Labels = map[string]string{"name": "web", "owner": "helm", "version": "1", "status": "deployed",
		labelObjects: objectsLabel("web", 1, 500, objects), labelManifestBytes: "500"}
	x, events := fakeIndex(t, rec, nil)
	if _, ok := x.deployedHolds("web", objects); !ok {
		t.Fatal("the deployed record does not vouch for its objects")
	}
	if _, ok := x.deployedHolds("web", sha256.Sum256(nil)); ok {
		t.Fatal("the deployed record vouches for other objects")
	}
	// Deleted by this process; the informer has not shown it yet.
	x.removed(rec.Name, rec.UID)
	if _, ok := x.deployedHolds("web", objects); ok {
		t.Error("a record this process deleted still vouches for its objects")
	}
	noted := func() int {
		x.mu.Lock()
		defer x.mu.Unlock()
		return len(x.deleted)
	}
	events.Delete(rec.DeepCopy())
	deadline := time.Now().Add(testenv.WaitTimeout)
	for noted() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the deletion is still noted after the informer showed it: %v", x.deleted)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := x.deployedHolds("web", objects); ok {
		t.Error("a deleted release's objects vouched for")
	}

	// Deleted before the informer showed it, which it does only now (a
	// LIST served late): it vouches for nothing either.
	late := rec.DeepCopy()
	late.UID, late.ResourceVersion = "uid-2", "20"
	x.removed(late.Name, late.UID)
	events.Add(late.DeepCopy())
	for {
		if o, ok, _ := x.informer.GetStore().GetByKey("system/" + late.Name); ok && o.(*metav1.PartialObjectMetadata).UID == late.UID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the informer did not show the late record")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := x.deployedHolds("web", objects); ok {
		t.Error("a record deleted before the informer showed it vouches for its objects")
	}

	// The notes are bounded: past the bound, those of records the informer
	// does not show are forgotten, the shown one is kept.
	for i := range maxDeletedNoted {
		x.removed(recordKey("gone", i+1), "uid-gone")
	}
	if n := noted(); n != 1 {
		t.Errorf("%d deletions noted past the bound, want 1 (the record the informer shows)", n)
	}
	if _, ok := x.deployedHolds("web", objects); ok {
		t.Error("the shown deleted record forgotten by the sweep")
	}
}

// fakeIndex is a record index, synced, over a fake list-watch that lists
// listed (at resourceVersion 10) and then shows what the test sends on
// the watcher it returns. configure, if set, runs before the index starts.
func fakeIndex(t *testing.T, listed *metav1.PartialObjectMetadata, configure func(*recordIndex)) (*recordIndex, *watch.FakeWatcher) {
	t.Helper()
	events := watch.NewFake()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: "10"}, Items: []metav1.PartialObjectMetadata{*listed}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return events, nil },
	}
	x := indexRecords(cache.NewSharedIndexInformer(listOnly{lw}, &metav1.PartialObjectMetadata{}, 0, recordIndexers), "system")
	if configure != nil {
		configure(x)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go x.run(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), x.informer.HasSynced) {
		t.Fatal("the index did not sync")
	}
	return x, events
}

// listOnly is a ListerWatcher that lists, rather than asking its watch
// for the initial list (which the fake watch would never end).
type listOnly struct{ *cache.ListWatch }

func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }
