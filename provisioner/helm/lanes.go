package helm

import (
	"context"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Renders share the children that run them fairly among their owners (a
// BundleDeployment, its release): a render whose owner is not known to be
// slow runs first in the fast lane, several at once, each child within a
// short time and a small address space; a render that goes over either is
// stopped there, its owner marked slow, and it runs again in the slow
// lane, with the render's own limits (SandboxLimits), one child at a time
// by default, niced. Renders of owners marked slow go to the slow lane
// directly, those whose last render there hit the time limit behind the
// others. So a chart that renders quickly waits for at most one fast-lane
// attempt of each chart started before it, never for a slow one; the
// children's address spaces add up to at most Fast × FastMemory + Slow ×
// the render's own (1 GiB with the defaults, as the two slots of 512 MiB
// before). The mark goes once the owner renders within the fast lane's
// time again, or with ForgetOwner (the release is uninstalled).

// RenderLanes configure the two lanes.
type RenderLanes struct {
	// Fast is how many children render in the fast lane at once, each
	// within FastTimeout and FastMemory (or the render's own limits, if
	// lower).
	Fast        int
	FastTimeout time.Duration
	FastMemory  int64
	// Slow is how many children render in the slow lane at once, each
	// within the render's own limits.
	Slow int
}

// DefaultRenderLanes render the shared test data's charts (the largest
// renders in about a second within 96 MiB) in the fast lane on an idle
// machine.
var DefaultRenderLanes = RenderLanes{Fast: 4, FastTimeout: 2 * time.Second, FastMemory: 128 << 20, Slow: 1}

// slowNice is the scheduling priority of a slow lane's child: it yields
// the CPU to the fast lane and to the provisioner itself.
const slowNice = 10

// maxSlowOwners bounds the owners remembered as slow.
const maxSlowOwners = 4096

type lane int

const (
	fastLane lane = iota
	slowLane
)

// lanes queue the renders of both lanes.
type lanes struct {
	mu     sync.Mutex
	cfg    RenderLanes
	busy   [2]int
	queues [2][]*ticket
	slow   map[string]*slowMark
	seq    uint64
}

// ticket is a render waiting for a child of its lane.
type ticket struct {
	owner string
	// offender orders the slow lane: the owner's last render hit the
	// time limit there.
	offender bool
	seq      uint64
	ready    chan struct{}
}

type slowMark struct {
	timedOut bool
	at       time.Time
}

var renderLanes = &lanes{cfg: DefaultRenderLanes, slow: map[string]*slowMark{}}

// SetRenderLanes changes how renders share children, process-wide (the
// provisioner's flags; tests), and returns the previous setting.
func SetRenderLanes(cfg RenderLanes) RenderLanes {
	l := renderLanes
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := l.cfg
	if cfg.Fast <= 0 {
		cfg.Fast = DefaultRenderLanes.Fast
	}
	if cfg.Slow <= 0 {
		cfg.Slow = DefaultRenderLanes.Slow
	}
	if cfg.FastTimeout <= 0 {
		cfg.FastTimeout = DefaultRenderLanes.FastTimeout
	}
	if cfg.FastMemory <= 0 {
		cfg.FastMemory = DefaultRenderLanes.FastMemory
	}
	l.cfg = cfg
	for ln := range l.queues {
		l.grantLocked(lane(ln))
	}
	return prev
}

// ForgetOwner drops what is remembered of owner's renders.
func ForgetOwner(owner string) {
	l := renderLanes
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.slow, owner)
}

func (l *lanes) config() RenderLanes {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg
}

func (l *lanes) capacity(ln lane) int {
	if ln == fastLane {
		return l.cfg.Fast
	}
	return l.cfg.Slow
}

// isSlow says whether owner's renders go to the slow lane directly.
func (l *lanes) isSlow(owner string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.slow[owner]
	return ok
}

// acquire waits for a child of lane ln; release gives it back.
func (l *lanes) acquire(ctx context.Context, ln lane, owner string) (release func(), err error) {
	l.mu.Lock()
	l.seq++
	t := &ticket{owner: owner, seq: l.seq, ready: make(chan struct{})}
	if m := l.slow[owner]; m != nil {
		t.offender = m.timedOut
	}
	l.queues[ln] = append(l.queues[ln], t)
	l.grantLocked(ln)
	l.mu.Unlock()
	release = func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.busy[ln]--
		l.grantLocked(ln)
	}
	select {
	case <-t.ready:
		return release, nil
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		select {
		case <-t.ready:
			l.busy[ln]--
			l.grantLocked(ln)
		default:
			l.queues[ln] = slices.DeleteFunc(l.queues[ln], func(o *ticket) bool { return o == t })
		}
		return nil, ctx.Err()
	}
}

// grantLocked hands free children of ln to the tickets first in line: in
// the fast lane in arrival order, in the slow lane offenders last.
func (l *lanes) grantLocked(ln lane) {
	q := l.queues[ln]
	if ln == slowLane {
		slices.SortStableFunc(q, func(a, b *ticket) int {
			switch {
			case a.offender != b.offender && a.offender:
				return 1
			case a.offender != b.offender:
				return -1
			case a.seq < b.seq:
				return -1
			case a.seq > b.seq:
				return 1
			}
			return 0
		})
	}
	for len(q) > 0 && l.busy[ln] < l.capacity(ln) {
		l.busy[ln]++
		close(q[0].ready)
		q = q[1:]
	}
	l.queues[ln] = q
}

// markSlow sends owner's renders to the slow lane from now on.
func (l *lanes) markSlow(owner string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.slow[owner]; !ok && len(l.slow) >= maxSlowOwners {
		// Forget the longest known.
		var oldest string
		var at time.Time
		for o, m := range l.slow {
			if oldest == "" || m.at.Before(at) {
				oldest, at = o, m.at
			}
		}
		delete(l.slow, oldest)
	}
	l.slow[owner] = &slowMark{at: time.Now()}
}

// slowDone records how owner's render in the slow lane went: one that hit
// the time limit makes it an offender; one that took no longer than the
// fast lane allows clears its mark (it was slow because the machine was).
func (l *lanes) slowDone(owner string, took time.Duration, timedOut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.slow[owner]
	switch {
	case m == nil:
	case timedOut:
		m.timedOut = true
	case took <= l.cfg.FastTimeout:
		delete(l.slow, owner)
	default:
		m.timedOut = false
	}
}

// nice lowers the scheduling priority of a slow lane's child.
func nice(c *child) {
	if c.cmd.Process != nil {
		// Best effort: a child that cannot be niced still renders.
		_ = syscall.Setpriority(syscall.PRIO_PROCESS, c.cmd.Process.Pid, slowNice)
	}
}
