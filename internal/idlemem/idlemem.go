// Package idlemem returns to the operating system, once a process goes
// idle after a burst of work, the heap memory the burst left free.
//
// The Go runtime keeps the heap it last needed: after a collection its
// goal is twice the live heap, and the scavenger releases only what lies
// beyond that goal. A controller that installs a fleet allocates hundreds
// of megabytes in a minute and then does nothing for hours; without a
// collection there is no new goal, and the pages the burst used stay
// resident (the provisioner sat at ~120 MiB of anonymous memory over a
// 46 MiB live heap). One forced collection and release when the burst is
// over brings it to the live heap, for the CPU of one collection per burst.
package idlemem

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The metrics read: cumulative allocation, and the heap the process holds
// (objects, dead ones not yet swept included; unused parts of spans; free
// spans not yet released) and the live heap of the last collection.
var metricNames = []string{
	"/gc/heap/allocs:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/gc/heap/live:bytes",
}

// Releaser releases free heap memory when the process has been idle for
// one Interval after allocating at least MinBurst bytes since its last
// release, and holds at least MinFree bytes of heap over its live heap.
type Releaser struct {
	// Interval is how often it looks, and how long the process must have
	// allocated less than IdleBytes to count as idle.
	Interval time.Duration
	// IdleBytes is what the process may allocate in an Interval and still
	// count as idle (informers and metrics scrapes allocate a little).
	IdleBytes uint64
	// MinBurst is what must have been allocated since the last release
	// for another to be worth a collection.
	MinBurst uint64
	// MinFree is the heap held over the live heap below which nothing is
	// done.
	MinFree uint64

	// For tests: read returns the cumulative bytes allocated and the heap
	// held over the live heap; release does the release.
	read    func() (allocs, free uint64)
	release func()
}

// Default looks every 30 s, counts under 32 MiB per 30 s (~1 MB/s: a few
// failing installs backing off) as idle, and releases after bursts of
// 64 MiB that left 16 MiB over the live heap.
func Default() *Releaser {
	return &Releaser{Interval: 30 * time.Second, IdleBytes: 32 << 20, MinBurst: 64 << 20, MinFree: 16 << 20}
}

// Start runs until ctx is done (a manager.Runnable).
func (r *Releaser) Start(ctx context.Context) error {
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	var w watch
	w.observe(r.readMetrics())
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if w.observe(r.readMetrics()) && r.due(&w) {
			r.doRelease()
			w.released()
		}
	}
}

// NeedLeaderElection is false: every replica has its own memory.
func (r *Releaser) NeedLeaderElection() bool { return false }

// watch is what a Releaser has seen.
type watch struct {
	allocs, lastAllocs uint64 // cumulative now, and at the previous look
	sinceRelease       uint64 // allocated since the last release
	free               uint64
	seen               bool
	// busy: a look since the last release saw the process not idle. A
	// trickle of allocation under the idle rate adds up too, but is no
	// burst: without this it forced a collection every few minutes.
	busy bool
}

// observe records a reading; false for the first, which has nothing to
// compare with.
func (w *watch) observe(allocs, free uint64) bool {
	first := !w.seen
	w.seen = true
	w.lastAllocs, w.allocs, w.free = w.allocs, allocs, free
	if first {
		w.lastAllocs = allocs
		return false
	}
	w.sinceRelease += allocs - w.lastAllocs
	return true
}

func (w *watch) released() { w.sinceRelease, w.busy = 0, false }

// due reports whether the process is idle after a burst worth releasing.
func (r *Releaser) due(w *watch) bool {
	if w.allocs-w.lastAllocs >= r.IdleBytes {
		w.busy = true
		return false
	}
	return w.busy && w.sinceRelease >= r.MinBurst && w.free >= r.MinFree
}

func (r *Releaser) readMetrics() (allocs, free uint64) {
	if r.read != nil {
		return r.read()
	}
	s := make([]metrics.Sample, len(metricNames))
	for i, name := range metricNames {
		s[i].Name = name
	}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0 // not in this Go version
		}
		return s[i].Value.Uint64()
	}
	held, live := v(1)+v(2)+v(3), v(4)
	if live > held {
		return v(0), 0
	}
	return v(0), held - live
}

func (r *Releaser) doRelease() {
	if r.release != nil {
		r.release()
		return
	}
	debug.FreeOSMemory()
}
