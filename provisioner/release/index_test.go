package release

import (
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// TestSettled: the fingerprint an Apply's own writes leave is told only
// when what the informer shows is accounted for by what it showed before
// the writes and the writes themselves.
func TestSettled(t *testing.T) {
	for _, tc := range []struct {
		name               string
		before, wrote, now map[string]string
		want               string
		ok                 bool
	}{
		{
			name:  "first install, informer behind",
			wrote: map[string]string{"v1": "u1@10"},
			want:  "v1@u1@10", ok: true,
		},
		{
			name:  "first install, informer caught up",
			wrote: map[string]string{"v1": "u1@10"},
			now:   map[string]string{"v1": "u1@10"},
			want:  "v1@u1@10", ok: true,
		},
		{
			name:   "upgrade: the new revision created, the old one superseded",
			before: map[string]string{"v1": "u1@10"},
			wrote:  map[string]string{"v2": "u2@12", "v1": "u1@13"},
			now:    map[string]string{"v1": "u1@10"},
			want:   "v1@u1@13,v2@u2@12", ok: true,
		},
		{
			name:   "history pruned",
			before: map[string]string{"v1": "u1@10", "v2": "u2@11"},
			wrote:  map[string]string{"v3": "u3@12", "v1": ""},
			now:    map[string]string{"v1": "u1@10", "v2": "u2@11"},
			want:   "v2@u2@11,v3@u3@12", ok: true,
		},
		{
			name:   "our record already written again by someone else: told, and it will not match",
			before: map[string]string{},
			wrote:  map[string]string{"v1": "u1@10"},
			now:    map[string]string{"v1": "u1@15"},
			want:   "v1@u1@10", ok: true,
		},
		{
			name:   "a record someone else created meanwhile",
			before: map[string]string{"v1": "u1@10"},
			wrote:  map[string]string{"v2": "u2@12"},
			now:    map[string]string{"v1": "u1@10", "v3": "u3@14"},
		},
		{
			name:   "a record someone else changed meanwhile",
			before: map[string]string{"v1": "u1@10"},
			wrote:  map[string]string{"v2": "u2@12"},
			now:    map[string]string{"v1": "u1@14"},
		},
		{
			name:   "a record deleted and created again meanwhile",
			before: map[string]string{"v1": "u1@10"},
			wrote:  map[string]string{"v2": "u2@12"},
			now:    map[string]string{"v1": "u9@14"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := settled(tc.before, tc.wrote, tc.now)
			if ok != tc.ok || got != tc.want {
				t.Errorf("settled = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestOnChange: the index tells the release of a record write or
// deletion someone else made, once per grace, and not of this process's
// own writes (including versions a later write of its own replaced, and
// writes the informer shows before their answers arrive), nor of the
// records listed at a start or shown again unchanged.
func TestOnChange(t *testing.T) {
	record := func(release string, version int, uid types.UID, rv string) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{}
		m.Name, m.Namespace, m.UID, m.ResourceVersion = recordKey(release, version), "system", uid, rv
		m.Labels = map[string]string{"name": release, "owner": "helm", "version": strconv.Itoa(version), "status": "deployed"}
		return m
	}
	// The grace is the test's: each check runs when the test says.
	scheduled := make(chan string, 100)
	var told []string
	x, events := fakeIndex(t, record("web", 1, "uid-1", "10"), func(x *recordIndex) {
		x.schedule = func(release string) { scheduled <- release }
		x.OnChange(func(release string) { told = append(told, release) })
	})
	// expectAfter sends a marker record of its own release after the
	// events of a step; the informer handles events in order, so every
	// release scheduled before the marker's was scheduled by the step.
	// Then it runs answered (the answers of this process's writes arriving
	// late), ends the grace of each scheduled release and checks what was
	// told.
	marker := 0
	expectAfter := func(step string, answered func(), want ...string) {
		t.Helper()
		marker++
		name := "marker-" + strconv.Itoa(marker)
		events.Add(record(name, 1, types.UID(name), strconv.Itoa(1000+marker)))
		var releases []string
		for len(releases) == 0 || releases[len(releases)-1] != name {
			select {
			case r := <-scheduled:
				releases = append(releases, r)
			case <-time.After(testenv.WaitTimeout):
				t.Fatalf("%s: the informer did not show the marker", step)
			}
		}
		if answered != nil {
			answered()
		}
		told = nil
		for _, r := range releases {
			x.check(r)
		}
		if got := told[:len(told)-1]; strings.Join(got, ",") != strings.Join(want, ",") || told[len(told)-1] != name {
			t.Errorf("%s: told %q, want %q and the marker", step, told, want)
		}
	}
	expect := func(step string, want ...string) {
		t.Helper()
		expectAfter(step, nil, want...)
	}
	noted := func() int {
		x.mu.Lock()
		defer x.mu.Unlock()
		return len(x.own)
	}
	expect("the records listed at the start")

	// This process upgrades web: creates v2 (written twice) and
	// supersedes v1.
	x.wroteAt("web", recordKey("web", 2), "uid-2", "11")
	x.wroteAt("web", recordKey("web", 2), "uid-2", "13")
	x.wroteAt("web", recordKey("web", 1), "uid-1", "12")
	events.Add(record("web", 2, "uid-2", "11"))
	events.Modify(record("web", 1, "uid-1", "12"))
	events.Modify(record("web", 2, "uid-2", "13"))
	expect("this process's writes")
	if own := noted(); own != 0 {
		t.Errorf("%d own writes still noted after the informer showed them all", own)
	}

	events.Modify(record("web", 2, "uid-2", "20"))
	expect("someone else's write of web's record", "web")
	events.Add(record("api", 1, "uid-3", "21"))
	expect("someone else's new record of api", "api")

	// A record deleted and created again under the same name by someone
	// else, whose version is below this process's last write of the old one.
	x.wroteAt("api", recordKey("api", 1), "uid-3", "30")
	events.Modify(record("api", 1, "uid-4", "22"))
	expect("a record of another UID", "api")

	// A relist shows records again unchanged.
	events.Modify(record("api", 1, "uid-4", "22"))
	expect("a record shown again unchanged")
	// A record moved to another release: a change of both.
	moved := record("api", 1, "uid-4", "23")
	moved.Labels["name"] = "db"
	events.Modify(moved)
	expect("a record moved from api to db", "db", "api")

	x.removed(recordKey("web", 1), "uid-1")
	events.Delete(record("web", 1, "uid-1", "12"))
	expect("this process's deletion")
	events.Delete(record("web", 2, "uid-2", "20"))
	expect("someone else's deletion", "web")

	// This process's write and deletion, shown before their answers came.
	events.Add(record("race", 1, "uid-r", "50"))
	expectAfter("this process's write shown before its answer", func() { x.wroteAt("race", recordKey("race", 1), "uid-r", "50") })
	events.Delete(record("race", 1, "uid-r", "50"))
	expectAfter("this process's deletion shown before its answer", func() { x.removed(recordKey("race", 1), "uid-r") })
	x.mu.Lock()
	_, own := x.own[recordKey("race", 1)]
	_, deleted := x.deleted[deletedRecord{recordKey("race", 1), "uid-r"}]
	x.mu.Unlock()
	if own || deleted {
		t.Errorf("still noted after their grace: the write %v, the deletion %v", own, deleted)
	}

	// Someone's burst of writes: told once.
	for i := range 5 {
		events.Modify(record("burst", 1, "uid-b", strconv.Itoa(60+i)))
	}
	expect("a burst of writes", "burst")
	// Past maxPendingChanges waiting changes, told whatever they were.
	for i := range maxPendingChanges + 1 {
		events.Modify(record("many", 1, "uid-m", strconv.Itoa(100+i)))
	}
	expectAfter("more changes than the bound, all this process's", func() {
		for i := range maxPendingChanges + 1 {
			x.wroteAt("many", recordKey("many", 1), "uid-m", strconv.Itoa(100+i))
		}
	}, "many")

	unlabelled := record("x", 1, "uid-5", "40")
	delete(unlabelled.Labels, "name")
	events.Add(unlabelled)
	expect("a record of no release")
}
