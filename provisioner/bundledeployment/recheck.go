package bundledeployment

import (
	"sync"
	"time"
)

// DefaultUnhealthyRecheck is how soon an unhealthy BundleDeployment is
// first judged again without an event.
const DefaultUnhealthyRecheck = healthRecheck

// rechecks spaces the rechecks of unhealthy BundleDeployments (issue 32):
// a recheck finding the same objects unhealthy for the same reasons waits
// twice as long as the one before, from base up to max (the install
// backoff's), so a fleet with failing pods does not poll the API server
// every 30 s. Events of the installed objects still bring a
// BundleDeployment back at once; a change of what is unhealthy, of the
// spec (generation), or health starts afresh. One entry per unhealthy
// BundleDeployment, dropped once it is healthy or deleted.
type rechecks struct {
	base, max time.Duration
	now       func() time.Time

	mu     sync.Mutex
	byName map[string]recheck
}

type recheck struct {
	generation int64
	// what is the unhealthy objects and their reasons (without the pods'
	// details, whose restart counts change by themselves).
	what  string
	delay time.Duration
	// since is when the BundleDeployment was first found unhealthy, kept
	// while it stays so whatever else changes.
	since time.Time
}

func newRechecks(base, limit time.Duration) *rechecks {
	if base <= 0 {
		base = DefaultUnhealthyRecheck
	}
	if limit <= 0 {
		limit = DefaultRetryMax
	}
	return &rechecks{base: base, max: max(limit, base), now: time.Now, byName: map[string]recheck{}}
}

// unhealthy records that BundleDeployment name at generation has what
// unhealthy and returns how soon to look again.
func (r *rechecks) unhealthy(name string, generation int64, what string) time.Duration {
	if r == nil {
		return DefaultUnhealthyRecheck
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.byName[name]
	since := r.now()
	if ok {
		since = e.since
	}
	if !ok || e.generation != generation || e.what != what {
		e = recheck{generation: generation, what: what, delay: r.base, since: since}
	} else {
		e.delay = min(2*e.delay, r.max)
	}
	r.byName[name] = e
	return e.delay
}

// explainAfter is how long a BundleDeployment stays unhealthy before the
// pods of its unready workloads are read to say why: half its first
// recheck. A rollout's pods are unready for a while as a matter of course
// (scheduled, pulling, starting), and reading them on every event of a
// fleet's rollouts found nothing to report.
func (r *rechecks) explainAfter() time.Duration {
	if r == nil {
		return 0
	}
	return r.base / 2
}

// explain says whether BundleDeployment name has been unhealthy for
// explainAfter: whether its unready workloads' pods are read.
func (r *rechecks) explain(name string) bool {
	if r == nil {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.byName[name]
	return ok && r.now().Sub(e.since) >= r.explainAfter()
}

// forget ends name's backoff: it is healthy, or gone.
func (r *rechecks) forget(name string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byName, name)
}
