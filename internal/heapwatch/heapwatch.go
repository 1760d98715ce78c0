// Package heapwatch measures how far the live heap grows while code runs,
// for tests and benchmarks that prove memory bounds under hostile input.
// It samples runtime/metrics instead of runtime.ReadMemStats, which stops
// the world and would slow what it measures.
package heapwatch

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

const (
	liveHeap  = "/memory/classes/heap/objects:bytes"
	allocated = "/gc/heap/allocs:bytes"
	interval  = 100 * time.Microsecond
)

// Start samples the live heap every 100µs until the returned func is
// called, which returns the largest growth over the level at Start.
func Start() (stop func() uint64) {
	s := []metrics.Sample{{Name: liveHeap}}
	read := func() uint64 { metrics.Read(s); return s[0].Value.Uint64() }
	base := read()
	var (
		peak uint64
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if v := read(); v > base {
				peak = max(peak, v-base)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak
	}
}

// Measure collects garbage, runs f and returns the largest growth of the
// live heap while it ran, the bytes it allocated and how long it took.
func Measure(f func()) (peak, allocs uint64, took time.Duration) {
	runtime.GC()
	s := []metrics.Sample{{Name: allocated}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	stop := Start()
	start := time.Now()
	f()
	took = time.Since(start)
	peak = stop()
	metrics.Read(s)
	return peak, s[0].Value.Uint64() - before, took
}
