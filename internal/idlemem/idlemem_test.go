package idlemem

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestDue(t *testing.T) {
	r := &Releaser{IdleBytes: 8, MinBurst: 100, MinFree: 50}
	type reading struct{ allocs, free uint64 }
	for _, tc := range []struct {
		name     string
		readings []reading
		want     []bool // due after each reading but the first
	}{
		{"idle from the start", []reading{{0, 1000}, {1, 1000}, {2, 1000}}, []bool{false, false}},
		{"busy, then idle: released once", []reading{{0, 0}, {500, 300}, {503, 300}, {505, 300}}, []bool{false, true, false}},
		{"still busy", []reading{{0, 0}, {500, 300}, {1000, 300}}, []bool{false, false}},
		{"a burst that left little free", []reading{{0, 0}, {500, 10}, {501, 10}}, []bool{false, false}},
		{"a small burst", []reading{{0, 0}, {50, 300}, {51, 300}}, []bool{false, false}},
		{"bursts add up across looks", []reading{{0, 0}, {60, 300}, {61, 300}, {121, 300}, {122, 300}}, []bool{false, false, false, true}},
		{"a trickle under the idle rate is no burst", []reading{{0, 0}, {5, 300}, {10, 300}, {15, 300}, {20, 300}, {25, 300}, {30, 300}, {35, 300}, {40, 300}, {45, 300}, {50, 300}, {55, 300}, {60, 300}, {65, 300}, {70, 300}, {75, 300}, {80, 300}, {85, 300}, {90, 300}, {95, 300}, {100, 300}, {105, 300}}, make([]bool, 21)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w watch
			w.observe(tc.readings[0].allocs, tc.readings[0].free)
			for i, rd := range tc.readings[1:] {
				if !w.observe(rd.allocs, rd.free) {
					t.Fatal("a second reading was taken for the first")
				}
				got := r.due(&w)
				if got {
					w.released()
				}
				if got != tc.want[i] {
					t.Fatalf("look %d: due = %v, want %v", i+1, got, tc.want[i])
				}
			}
		})
	}
}

// The real metrics: a burst that is dropped leaves heap over the live
// heap, which the releaser sees and gives back once the process is idle.
func TestReleasesAfterABurst(t *testing.T) {
	var released atomic.Int32
	r := Default()
	r.Interval = 20 * time.Millisecond
	r.MinBurst = 32 << 20
	// Any heap over the live heap: the background scavenger may have
	// returned most of the burst's pages before the first look.
	r.MinFree = 1
	r.IdleBytes = 4 << 20
	r.release = func() { released.Add(1) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { _ = r.Start(ctx); close(done) }()

	time.Sleep(3 * r.Interval)
	allocateBurst(64)
	runtime.GC() // the burst is dead: held over the live heap
	deadline := time.Now().Add(time.Minute)
	for released.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(r.Interval)
	}
	if released.Load() == 0 {
		allocs, over := r.readMetrics()
		t.Fatalf("no release within a minute of a 64 MiB burst (allocated %d, held over the live heap %d)", allocs, over)
	}
	time.Sleep(10 * r.Interval)
	if n := released.Load(); n != 1 {
		t.Fatalf("%d releases for one burst, want 1", n)
	}
	cancel()
	<-done
}

// allocateBurst allocates n MiB that are dead once it returns.
func allocateBurst(n int) {
	burst := make([][]byte, 0, n)
	for range n {
		burst = append(burst, make([]byte, 1<<20))
	}
	runtime.KeepAlive(burst)
}
