package bundledeployment

import (
	"testing"
	"time"
)

func TestRechecksBackOff(t *testing.T) {
	r := newRechecks(30*time.Second, 5*time.Minute)
	var got []time.Duration
	for range 6 {
		got = append(got, r.unhealthy("bd", 1, "Deployment a/b: LessReplicas"))
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("schedule %v, want %v", got, want)
		}
	}
	if d := r.unhealthy("other", 1, "Deployment a/b: LessReplicas"); d != 30*time.Second {
		t.Errorf("another BundleDeployment's first recheck after %s, want 30s", d)
	}
	if d := r.unhealthy("bd", 1, "Deployment a/c: LessReplicas"); d != 30*time.Second {
		t.Errorf("after a change of what is unhealthy: %s, want 30s", d)
	}
	r.unhealthy("bd", 1, "Deployment a/c: LessReplicas")
	if d := r.unhealthy("bd", 2, "Deployment a/c: LessReplicas"); d != 30*time.Second {
		t.Errorf("after a spec change: %s, want 30s", d)
	}
	r.unhealthy("bd", 2, "Deployment a/c: LessReplicas")
	r.forget("bd")
	if d := r.unhealthy("bd", 2, "Deployment a/c: LessReplicas"); d != 30*time.Second {
		t.Errorf("after being healthy: %s, want 30s", d)
	}
	if _, ok := r.byName["bd"]; !ok || len(r.byName) != 2 {
		t.Errorf("entries %v, want bd and other", r.byName)
	}
	r.forget("bd")
	r.forget("other")
	if len(r.byName) != 0 {
		t.Errorf("entries left after every BundleDeployment is healthy: %v", r.byName)
	}
}

func TestRechecksDefaults(t *testing.T) {
	r := newRechecks(0, 0)
	if r.base != DefaultUnhealthyRecheck || r.max != DefaultRetryMax {
		t.Errorf("defaults %s..%s, want %s..%s", r.base, r.max, DefaultUnhealthyRecheck, DefaultRetryMax)
	}
	// A max below the base is the base.
	if r := newRechecks(time.Minute, time.Second); r.max != time.Minute {
		t.Errorf("max %s, want the base", r.max)
	}
}

// An unready workload's pods are read only once its BundleDeployment has
// been unhealthy for half the first recheck, however its reasons change
// meanwhile, and again from the start after it was healthy.
func TestRechecksExplainAfterAWhile(t *testing.T) {
	r := newRechecks(30*time.Second, 5*time.Minute)
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	if r.explain("bd") {
		t.Fatal("pods read for a BundleDeployment never found unhealthy")
	}
	r.unhealthy("bd", 1, "Deployment a/b: Available: 0/1")
	now = now.Add(14 * time.Second)
	r.unhealthy("bd", 2, "Deployment a/b: Available: 0/2")
	if r.explain("bd") {
		t.Error("pods read 14 s into a rollout")
	}
	now = now.Add(time.Second)
	if !r.explain("bd") {
		t.Error("pods not read 15 s into an unhealthy streak whose reasons and spec changed")
	}
	if r.explain("other") {
		t.Error("another BundleDeployment's pods read")
	}
	r.forget("bd")
	r.unhealthy("bd", 2, "Deployment a/b: Available: 0/2")
	if r.explain("bd") {
		t.Error("pods read at once after being healthy")
	}
	var none *rechecks
	if !none.explain("bd") {
		t.Error("a reconciler without rechecks never reads pods")
	}
}
