package provisioner_test

import (
	"bytes"
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/heapwatch"
)

// peakGCPercent is the GOGC the install runs under: collections every
// quarter of growth, so the largest live heap a collection finds is close
// to the most the install held at once.
const peakGCPercent = 25

// The heap an install of large CRDs holds at once is a small multiple of
// their YAML: the bundle is decoded once and rendered once into the
// release record, which is encoded as it is compressed, and the API
// server's answers to the applies are read as metadata only. (Before,
// every object was also copied while rendering, the record's JSON held
// whole in a growing buffer, and each apply's answer decoded whole, 64 at
// a time.) The figure is the live heap collections found (garbage left
// out), so it does not depend on how far the machine's load lets garbage
// run ahead of the collector.
//
// RUKPAK_HEAP_PROFILE=file writes heap profiles before (file.base) and
// after the install: `go tool pprof -diff_base file.base file` shows what
// the install allocated (alloc_space); file.peak is the one taken when a
// collection found the largest live heap (inuse_space: what was held).
func TestIntegrationPeakHeapOfLargeCRDs(t *testing.T) {
	// Not parallel: it measures the heap of this process and changes its
	// GC percent, which parallel tests would disturb and be disturbed by.
	files, size := realCRDs(t)
	h := newHarness(t)
	ctx := context.Background()
	src := h.pushBundle("peak-crds", files)

	waitIdle(t, busy(t))
	defer debug.SetGCPercent(debug.SetGCPercent(peakGCPercent))
	before := liveHeap()
	out := os.Getenv("RUKPAK_HEAP_PROFILE")
	if out != "" {
		writeAllocs(t, out+".base")
	}
	stopLive := watchLiveHeap(out != "")
	stop := heapwatch.Start()
	if err := h.c.Create(ctx, newBD("peak-crds", src)); err != nil {
		t.Fatal(err)
	}
	h.waitBDExact("peak-crds", rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "All installed objects are healthy")
	withGarbage := stop()
	peak, profile := stopLive()
	if out != "" {
		writeAllocs(t, out)
		if err := os.WriteFile(out+".peak", profile, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	growth := int64(peak) - int64(before)
	factor := float64(growth) / float64(size)
	t.Logf("%d CRDs, %.1f MiB of YAML: live heap %.1f MiB before the install, at most %.1f MiB during it: +%.1f MiB (%.1f× the YAML); with garbage, at GOGC=%d, up to +%.1f MiB",
		len(files), float64(size)/(1<<20), float64(before)/(1<<20), float64(peak)/(1<<20), float64(growth)/(1<<20), factor, peakGCPercent, float64(withGarbage)/(1<<20))
	// The bundle archive, its decoded objects, the rendered manifest and
	// what is in flight beside them (documents being decoded or
	// rendered, requests), at the moment a collection looked.
	const maxFactor = 9
	if factor > maxFactor {
		t.Errorf("installing %.1f MiB of CRDs held %.1f MiB more live heap at its peak (%.1f× the YAML), want at most %d× (%.1f MiB)",
			float64(size)/(1<<20), float64(growth)/(1<<20), factor, maxFactor, float64(maxFactor*size)/(1<<20))
	}
}

func writeAllocs(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
}

// watchLiveHeap follows the live heap each collection finds until the
// returned func is called, which returns the largest and, if profile is
// set, a heap profile taken right after the collection that found it.
func watchLiveHeap(profile bool) func() (uint64, []byte) {
	var (
		most uint64
		best []byte
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	wg.Go(func() {
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > most {
				most = v
				if profile {
					var buf bytes.Buffer
					if pprof.WriteHeapProfile(&buf) == nil {
						best = buf.Bytes()
					}
				}
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	return func() (uint64, []byte) {
		close(done)
		wg.Wait()
		return most, best
	}
}
