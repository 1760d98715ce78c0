package bundledeployment

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// fakeClock is the retries' clock, moved by the test.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func testRetries(base, limit time.Duration) (*retries, *fakeClock) {
	clock := &fakeClock{t: time.Date(2026, 11, 28, 13, 19, 25, 0, time.UTC)}
	r := newRetries(base, limit)
	r.now = clock.now
	return r, clock
}

func failingBD(name string) *rukpakv1alpha1.BundleDeployment {
	return &rukpakv1alpha1.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}}
}

func TestRetriesBackOff(t *testing.T) {
	r, clock := testRetries(5*time.Second, time.Minute)
	bd := failingBD("a")
	if d := r.wait(bd); d != 0 {
		t.Fatalf("a BundleDeployment that never failed waits %s", d)
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute}
	for i, w := range want {
		in, at := r.failed(bd, nil)
		if in != w || !at.Equal(clock.t.Add(w)) {
			t.Fatalf("failure %d: next attempt in %s at %s, want in %s", i+1, in, at, w)
		}
		// Events of installed objects before the due time do nothing.
		clock.t = clock.t.Add(w - time.Second)
		if d := r.wait(bd); d != time.Second {
			t.Fatalf("failure %d: one second before the attempt, wait says %s", i+1, d)
		}
		clock.t = clock.t.Add(time.Second)
		if d := r.wait(bd); d != 0 {
			t.Fatalf("failure %d: at the due time, wait says %s", i+1, d)
		}
	}
	r.succeeded(bd.Name)
	if in, _ := r.failed(bd, nil); in != 5*time.Second {
		t.Errorf("after a success the first failure waits %s, want the base", in)
	}
}

func TestRetriesReset(t *testing.T) {
	for name, change := range map[string]func(*rukpakv1alpha1.BundleDeployment){
		"spec": func(bd *rukpakv1alpha1.BundleDeployment) { bd.Generation++ },
		"approval": func(bd *rukpakv1alpha1.BundleDeployment) {
			bd.Annotations = map[string]string{rukpakv1alpha1.AnnotationApprovedBundle: "x"}
		},
		"skip preflight": func(bd *rukpakv1alpha1.BundleDeployment) {
			bd.Annotations = map[string]string{rukpakv1alpha1.AnnotationSkipCRDUpgradePreflight: "true"}
		},
		"reconcile request": func(bd *rukpakv1alpha1.BundleDeployment) {
			bd.Annotations = map[string]string{rukpakv1alpha1.AnnotationReconcileRequestedAt: "now"}
		},
	} {
		t.Run(name, func(t *testing.T) {
			r, _ := testRetries(time.Hour, time.Hour)
			bd := failingBD("a")
			r.failed(bd, []string{"widgets.example.com"})
			r.failed(bd, []string{"widgets.example.com"})
			change(bd)
			if d := r.wait(bd); d != 0 {
				t.Fatalf("after a %s change, wait says %s", name, d)
			}
			if n, idx := r.waiting(); n != 0 || idx != 0 {
				t.Fatalf("after a %s change, %d entries and %d indexed remain", name, n, idx)
			}
			if in, _ := r.failed(bd, nil); in != time.Hour {
				t.Fatalf("after a %s change, the next failure waits %s, want the base", name, in)
			}
		})
	}
	t.Run("other annotations", func(t *testing.T) {
		r, _ := testRetries(time.Hour, time.Hour)
		bd := failingBD("a")
		r.failed(bd, nil)
		bd.Annotations = map[string]string{"someone/else": "x"}
		if d := r.wait(bd); d == 0 {
			t.Fatal("an unrelated annotation ended the backoff")
		}
	})
}

func TestRetriesWake(t *testing.T) {
	r, _ := testRetries(time.Hour, time.Hour)
	a, b := failingBD("a"), failingBD("b")
	r.failed(a, nil)
	r.failed(b, nil)
	r.wake("a")
	r.wake("unknown") // no entry: nothing to wake, nothing kept
	if d := r.wait(a); d != 0 {
		t.Errorf("woken a waits %s", d)
	}
	if d := r.wait(b); d == 0 {
		t.Error("b was not woken but may attempt")
	}
	// A wake is used once: the attempt it allowed fails, and the next
	// waits again, twice as long.
	if in, _ := r.failed(a, nil); in != time.Hour {
		t.Errorf("second failure waits %s", in)
	}
	if d := r.wait(a); d == 0 {
		t.Error("a attempts again without a new wake")
	}
	if n, _ := r.waiting(); n != 2 {
		t.Errorf("%d entries, want 2", n)
	}
}

func TestRetriesWaitForCRDs(t *testing.T) {
	r, _ := testRetries(time.Hour, time.Hour)
	a, b, c := failingBD("a"), failingBD("b"), failingBD("c")
	r.failed(a, []string{"monitoring.coreos.com"})
	r.failed(b, []string{"monitoring.coreos.com", "widgets.example.com"})
	r.failed(c, []string{"widgets.example.com"})
	if got := r.wakeGroup("other.example.com"); len(got) != 0 {
		t.Fatalf("a CRD of a group nobody misses woke %v", got)
	}
	if got := fmt.Sprint(r.wakeGroup("monitoring.coreos.com")); got != "[a b]" {
		t.Fatalf("woken %s, want [a b]", got)
	}
	if r.wait(a) != 0 || r.wait(b) != 0 || r.wait(c) == 0 {
		t.Fatal("a and b should attempt, c wait")
	}
	// b now misses only widgets: the index follows.
	r.failed(b, []string{"widgets.example.com"})
	if got := fmt.Sprint(r.wakeGroup("monitoring.coreos.com")); got != "[a]" {
		t.Fatalf("woken %s, want [a]", got)
	}
	r.forget("a")
	r.succeeded("c")
	if n, idx := r.waiting(); n != 1 || idx != 1 {
		t.Fatalf("%d entries, %d indexed; want 1 and 1 (b, widgets)", n, idx)
	}
}

// A CRD that appears while an attempt runs (after it found the kind
// missing, before it recorded the failure) is not lost.
func TestRetriesCRDDuringAttempt(t *testing.T) {
	r, _ := testRetries(time.Hour, time.Hour)
	bd := failingBD("a")
	r.failed(bd, []string{"widgets.example.com"})
	r.wakeGroup("widgets.example.com")
	if d := r.wait(bd); d != 0 {
		t.Fatalf("woken, waits %s", d)
	}
	// The attempt runs; the CRD's Established status arrives meanwhile.
	r.wakeGroup("widgets.example.com")
	r.failed(bd, []string{"widgets.example.com"})
	if d := r.wait(bd); d != 0 {
		t.Fatalf("a CRD event during the failed attempt was lost: waits %s", d)
	}
}

func TestRetriesIndexBounded(t *testing.T) {
	r, _ := testRetries(time.Hour, time.Hour)
	var groups []string
	for i := range 100 {
		groups = append(groups, fmt.Sprintf("g%03d.example.com", i))
	}
	for i := range 50 {
		bd := failingBD(fmt.Sprintf("bd-%d", i))
		for range 3 {
			r.failed(bd, groups)
		}
	}
	if n, idx := r.waiting(); n != 50 || idx != 50*maxWaitGroups {
		t.Fatalf("%d entries, %d indexed; want 50 and %d", n, idx, 50*maxWaitGroups)
	}
}

func TestMissingGroup(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"typed", &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "widgets.example.com", Kind: "Widget"}, SearchedVersions: []string{"v1"}}, "[widgets.example.com]"},
		{"wrapped", fmt.Errorf("applying: %w", &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "monitoring.coreos.com", Kind: "ServiceMonitor"}}), "[monitoring.coreos.com]"},
		{"text", errors.New(`installing release "x": resource mapping not found for name: "w" namespace: "" from "": no matches for kind "Widget" in version "widgets.example.com/v1"
ensure CRDs are installed first`), "[widgets.example.com]"},
		{"joined", errors.Join(
			errors.New(`no matches for kind "ServiceMonitor" in version "monitoring.coreos.com/v1"`),
			errors.New(`no matches for kind "Widget" in version "widgets.example.com/v1"`)), "[monitoring.coreos.com widgets.example.com]"},
		{"core kind", errors.New(`no matches for kind "Pod" in version "v1"`), "[]"},
		{"other failure", errors.New("namespaces \"x\" not found"), "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(missingGroups(tc.err)); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	var many []string
	for i := range 50 {
		many = append(many, fmt.Sprintf(`no matches for kind "K" in version "g%02d.example.com/v1"`, i))
	}
	if got := missingGroups(errors.New(strings.Join(many, "; "))); len(got) != maxWaitGroups {
		t.Errorf("%d groups from 50, want %d", len(got), maxWaitGroups)
	}
}

func TestRetryMessage(t *testing.T) {
	at := time.Date(2026, 11, 28, 14, 20, 5, 0, time.FixedZone("CET", 3600))
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{40 * time.Second, "failed; next attempt in 40s at 2026-11-28T13:20:05Z"},
		{5 * time.Minute, "failed; next attempt in 5m at 2026-11-28T13:20:05Z"},
		{90 * time.Second, "failed; next attempt in 1m30s at 2026-11-28T13:20:05Z"},
		{time.Hour, "failed; next attempt in 1h at 2026-11-28T13:20:05Z"},
		{2500 * time.Millisecond, "failed; next attempt in 3s at 2026-11-28T13:20:05Z"},
	} {
		msg := retryMessage("failed", tc.in, at)
		if msg != tc.want {
			t.Errorf("%s: %q, want %q", tc.in, msg, tc.want)
			continue
		}
		in, gotAt, ok := ParseRetry(msg)
		if !ok || in != tc.in.Round(time.Second) || !gotAt.Equal(at) {
			t.Errorf("%s: parsed back %s %s %v", tc.in, in, gotAt, ok)
		}
	}
	for _, msg := range []string{"failed", "failed; next attempt in soon at 2026-11-28T13:20:05Z", "failed; next attempt in 5s at tomorrow", "failed; next attempt in 5s at 2026-11-28T13:20:05Z and more"} {
		if _, _, ok := ParseRetry(msg); ok {
			t.Errorf("%q parsed as an announcement", msg)
		}
	}
	long := strings.Repeat("x", 40000)
	if msg := retryMessage(cutForRetry(long), time.Minute, at); len(msg) > 32000 {
		t.Errorf("a long message with its announcement is %d bytes, over the condition's limit", len(msg))
	} else if _, _, ok := ParseRetry(msg); !ok {
		t.Error("the announcement after a long message does not parse")
	}
}

// An attempt a CRD allowed that still misses the kind (the API server
// serves it a moment after the CRD is Established) is tried again soon,
// without lengthening the backoff.
func TestRetriesCRDSettles(t *testing.T) {
	r, clock := testRetries(time.Minute, time.Hour)
	bd := failingBD("a")
	r.failed(bd, []string{"widgets.example.com"})
	r.failed(bd, []string{"widgets.example.com"}) // 2m
	r.wakeGroup("widgets.example.com")
	if d := r.wait(bd); d != 0 {
		t.Fatalf("woken, waits %s", d)
	}
	if in, _ := r.failed(bd, []string{"widgets.example.com"}); in != crdSettle {
		t.Fatalf("still missing after the CRD: next attempt in %s, want %s", in, crdSettle)
	}
	clock.t = clock.t.Add(crdSettle)
	if d := r.wait(bd); d != 0 {
		t.Fatalf("at the settle time, waits %s", d)
	}
	if in, _ := r.failed(bd, []string{"widgets.example.com"}); in != 4*time.Minute {
		t.Fatalf("the next plain failure waits %s, want 4m", in)
	}
}

func TestUnchangedSinceRecorded(t *testing.T) {
	want := func(apiVersion, kind string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetNamespace("ns")
		u.SetName("x")
		return u
	}
	md := func(rv string, deleting bool) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}}
		if deleting {
			now := metav1.Now()
			m.DeletionTimestamp = &now
		}
		return m
	}
	recorded := func(rv uint64, ok bool) func(string) (uint64, bool) {
		return func(string) (uint64, bool) { return rv, ok }
	}
	for _, tc := range []struct {
		name     string
		obj      *unstructured.Unstructured
		m        *metav1.PartialObjectMetadata
		recorded func(string) (uint64, bool)
		want     bool
	}{
		{"older ConfigMap", want("v1", "ConfigMap"), md("100", false), recorded(200, true), true},
		{"written since", want("v1", "ConfigMap"), md("300", false), recorded(200, true), false},
		{"same version", want("v1", "ConfigMap"), md("200", false), recorded(200, true), false},
		{"records unknown", want("v1", "ConfigMap"), md("100", false), recorded(0, false), false},
		{"being deleted", want("v1", "ConfigMap"), md("100", true), recorded(200, true), false},
		{"not a number", want("v1", "ConfigMap"), md("abc", false), recorded(200, true), false},
		{"kind with a status", want("apps/v1", "Deployment"), md("100", false), recorded(200, true), false},
		{"no index", want("v1", "ConfigMap"), md("100", false), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Tracker{recordedAt: tc.recorded, observed: map[string]map[objectKey]observation{}}
			if got := tr.unchangedSinceRecorded("owner", tc.obj, tc.m); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOwnWrite(t *testing.T) {
	tr := &Tracker{observed: map[string]map[objectKey]observation{}}
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetNamespace("ns")
	cm.SetName("x")
	tr.restored("owner", cm, release.Applied{ResourceVersion: "42"})
	event := func(rv, owner string) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", ResourceVersion: rv,
			Labels: map[string]string{rukpakv1alpha1.LabelOwnerKind: "BundleDeployment", rukpakv1alpha1.LabelOwnerName: owner}}}
		m.SetGroupVersionKind(cm.GroupVersionKind())
		return m
	}
	if !tr.ownWrite(event("42", "owner")) {
		t.Error("the restore's own version was not recognised")
	}
	if tr.ownWrite(event("43", "owner")) {
		t.Error("a later write was taken for the restore's")
	}
	if tr.ownWrite(event("42", "other")) {
		t.Error("another owner's object was taken for this one's")
	}
	dep := cm.DeepCopy()
	dep.SetAPIVersion("apps/v1")
	dep.SetKind("Deployment")
	tr.restored("owner", dep, release.Applied{ResourceVersion: "50"})
	d := event("50", "owner")
	d.SetGroupVersionKind(dep.GroupVersionKind())
	if tr.ownWrite(d) {
		t.Error("a kind with a status was judged from the apply's answer: its status must still be read")
	}
}

// TestRetriesKeepExplanation: a failing install's retries explain with
// what was said of the same Bundle before; another Bundle, a success or
// an explanation too long to keep explains again.
func TestRetriesKeepExplanation(t *testing.T) {
	r, _ := testRetries(5*time.Second, time.Minute)
	bd := failingBD("a")
	asked := 0
	explain := func(text string) func() string {
		return func() string { asked++; return text }
	}
	attempt := func(uid, text string) string {
		t.Helper()
		r.failed(bd, nil)
		return r.explanation(bd.Name, uid, explain(text))
	}
	if got := attempt("b1", "deps: x"); got != "deps: x" || asked != 1 {
		t.Fatalf("first failure: %q, explained %d times", got, asked)
	}
	if got := attempt("b1", "something else"); got != "deps: x" || asked != 1 {
		t.Errorf("a retry with the same Bundle: %q, explained %d times, want the kept one and 1", got, asked)
	}
	if got := attempt("b2", "deps: y"); got != "deps: y" || asked != 2 {
		t.Errorf("another Bundle: %q, explained %d times, want it explained anew", got, asked)
	}
	if got := attempt("b2", ""); got != "deps: y" || asked != 2 {
		t.Errorf("a retry: %q, explained %d times", got, asked)
	}
	r.succeeded(bd.Name)
	if got := attempt("b2", "after success"); got != "after success" || asked != 3 {
		t.Errorf("after a success: %q, explained %d times, want it explained anew", got, asked)
	}
	long := strings.Repeat("d", maxExplanation+1)
	attempt("b3", long)
	attempt("b3", long)
	if asked != 5 {
		t.Errorf("an explanation over %d bytes: explained %d times in all, want 5 (never kept)", maxExplanation, asked)
	}
	// Without a name for the Bundle nothing is taken for the same one.
	attempt("", "")
	attempt("", "")
	if asked != 7 {
		t.Errorf("without a name: explained %d times in all, want 7", asked)
	}
}
