package provisioner_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/heapwatch"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testfiles"
	"github.com/rukpak-dev/rukpak/internal/testmetrics"
	"github.com/rukpak-dev/rukpak/provisioner"
)

// realCRDs is one plain bundle's manifests made of the CRDs of the shared
// test data (the registry+v1 bundles' and the prometheus-operator-crds
// chart's, rendered with its default values), one per file, each name
// once (the chart's version of a CRD wins); and their YAML's size.
func realCRDs(t *testing.T) (map[string]string, int) {
	t.Helper()
	shared := filepath.Join(testenv.RepoRoot(), "..", "shared", "testdata")
	var docs [][]byte
	for _, r := range testfiles.RenderChart(t, filepath.Join(shared, "helm", "prometheus-operator-crds")) {
		docs = append(docs, []byte(r))
	}
	files, err := filepath.Glob(filepath.Join(shared, "registry-v1", "*", "manifests", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, data)
	}

	out := map[string]string{}
	seen := map[string]bool{}
	size := 0
	for _, data := range docs {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if err.Error() == "EOF" {
					break
				}
				t.Fatal(err)
			}
			if u.GetKind() != "CustomResourceDefinition" || seen[u.GetName()] {
				continue
			}
			seen[u.GetName()] = true
			y, err := yaml.Marshal(u.Object)
			if err != nil {
				t.Fatal(err)
			}
			out[fmt.Sprintf("manifests/%s.yaml", u.GetName())] = string(y)
			size += len(y)
		}
	}
	return out, size
}

// inOtherGroups is files' CRDs, each serving its kinds in prefix + its
// group instead.
func inOtherGroups(t *testing.T, files map[string]string, prefix string) map[string]string {
	t.Helper()
	out := make(map[string]string, len(files))
	for _, data := range files {
		crd := map[string]any{}
		if err := yaml.Unmarshal([]byte(data), &crd); err != nil {
			t.Fatal(err)
		}
		name, y := testfiles.Regrouped(t, crd, prefix)
		out["manifests/"+name+".yaml"] = string(y)
	}
	return out
}

// busy sums the gauges of controllers at work and work queued. Managers
// of earlier tests in the process leave their series behind: callers
// compare with a level taken at their start.
func busy(t *testing.T) float64 {
	return sumSeries(t, "controller_runtime_active_workers") + sumSeries(t, "workqueue_depth")
}

func sumSeries(t *testing.T, name string) float64 {
	t.Helper()
	total := 0.0
	for _, s := range testmetrics.Series(t, name, nil) {
		v, err := strconv.ParseFloat(strings.TrimPrefix(s[strings.LastIndexByte(s, ' ')+1:], "count="), 64)
		if err != nil {
			t.Fatal(err)
		}
		total += v
	}
	return total
}

// waitIdle waits until no controller has worked or had work queued (over
// level busy0) for a second: what the heap holds then is what the
// provisioner keeps.
func waitIdle(t *testing.T, busy0 float64) {
	t.Helper()
	quiet, last := 0, -1.0
	eventually(t, "the controllers idle", func() error {
		b := busy(t) - busy0
		done := sumSeries(t, "controller_runtime_reconcile_total")
		if b > 0 || done != last {
			quiet, last = 0, done
			return fmt.Errorf("%v busy, %v reconciles", b, done)
		}
		if quiet++; quiet < 10 {
			return fmt.Errorf("quiet for %d polls", quiet)
		}
		return nil
	})
}

// liveHeap is the heap's live objects after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// peakGCPercent is the GOGC the install runs under: collections every
// quarter of growth, so the largest live heap a collection finds is close
// to the most the install held at once.
const peakGCPercent = 25

// TestIntegrationHeapOfLargeCRDs installs one bundle of large real CRDs
// and measures the heap twice: what the install holds at once, and what
// the provisioner keeps once it is done. (One install for both: each
// starts an API server and establishes 6 MiB of CRDs, in a process of
// its own.)
//
// At its peak, the install holds a small multiple of the YAML: the bundle
// is decoded once and rendered once into the release record, which is
// encoded as it is compressed, and the API server's answers to the
// applies are read as metadata only. (Before, every object was also
// copied while rendering, the record's JSON held whole in a growing
// buffer, and each apply's answer decoded whole, 64 at a time.) The
// figure is the live heap collections found (garbage left out), so it
// does not depend on how far the machine's load lets garbage run ahead of
// the collector.
//
// Afterwards, the heap it keeps grows with the number of objects it
// installed, not with their size: the cache of installed objects holds
// their metadata only (before, the CRDs' 6 MiB of YAML left 18.5 MiB
// behind).
//
// RUKPAK_HEAP_PROFILE=file writes heap profiles before (file.base) and
// after the install: `go tool pprof -diff_base file.base file` shows what
// the install allocated (alloc_space); file.peak is the one taken when a
// collection found the largest live heap (inuse_space: what was held);
// file.retained is taken once every controller is idle (inuse_space:
// what is kept).
func TestIntegrationHeapOfLargeCRDs(t *testing.T) {
	// Not parallel: it measures the heap of this process, changes its GC
	// percent and waits for every controller in it to go idle, which
	// parallel tests would disturb and be disturbed by.
	files, size := realCRDs(t)
	objects := len(files)
	// No object cache: it keeps decoded objects on purpose, within its own
	// bound (--object-cache-bytes; TestIntegrationObjectCacheBound), and
	// this test measures what everything else keeps.
	h := newHarnessWith(t, func(o *provisioner.Options) { o.ObjectCacheBytes = -1 })
	ctx := context.Background()
	src := h.pushBundle("big-crds", files)

	busy0 := busy(t)
	// The same CRDs in other groups first: what the process keeps once
	// for any install (buffers grown to the largest file, pooled gzip
	// writers and decoders, clients) is kept before the measure, whichever
	// tests ran before this one in the process.
	if err := h.c.Create(ctx, newBD("warm-crds", h.pushBundle("warm-crds", inOtherGroups(t, files, "warm.")))); err != nil {
		t.Fatal(err)
	}
	h.waitBD("warm-crds", rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "")
	waitIdle(t, busy0)
	before := idleHeap()
	gcPercent := debug.SetGCPercent(peakGCPercent)
	defer debug.SetGCPercent(gcPercent)
	out := os.Getenv("RUKPAK_HEAP_PROFILE")
	if out != "" {
		writeAllocs(t, out+".base")
	}
	stopLive := watchLiveHeap(out != "")
	stop := heapwatch.Start()
	if err := h.c.Create(ctx, newBD("big-crds", src)); err != nil {
		t.Fatal(err)
	}
	h.waitBDExact("big-crds", rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "All installed objects are healthy")
	withGarbage := stop()
	peak, profile := stopLive()
	debug.SetGCPercent(gcPercent)
	if out != "" {
		writeAllocs(t, out)
		if err := os.WriteFile(out+".peak", profile, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	growth := int64(peak) - int64(before)
	factor := float64(growth) / float64(size)
	t.Logf("%d CRDs, %.1f MiB of YAML: live heap %.1f MiB before the install, at most %.1f MiB during it: +%.1f MiB (%.1f× the YAML); with garbage, at GOGC=%d, up to +%.1f MiB",
		objects, float64(size)/(1<<20), float64(before)/(1<<20), float64(peak)/(1<<20), float64(growth)/(1<<20), factor, peakGCPercent, float64(withGarbage)/(1<<20))
	// The bundle archive, its decoded objects, the rendered manifest and
	// what is in flight beside them (documents being decoded or
	// rendered, requests), at the moment a collection looked.
	const maxFactor = 9
	if factor > maxFactor {
		t.Errorf("installing %.1f MiB of CRDs held %.1f MiB more live heap at its peak (%.1f× the YAML), want at most %d× (%.1f MiB)",
			float64(size)/(1<<20), float64(growth)/(1<<20), factor, maxFactor, float64(maxFactor*size)/(1<<20))
	}

	// What is left once every controller is idle is what the provisioner
	// keeps for this install.
	waitIdle(t, busy0)
	after := idleHeap()
	if out != "" {
		f, err := os.Create(out + ".retained")
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.WriteHeapProfile(f); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	retained := int64(after) - int64(before)
	t.Logf("live heap %.1f MiB once idle: retained %+.1f MiB", float64(after)/(1<<20), float64(retained)/(1<<20))
	// A fixed part (informers, watches, metrics, events) and a small one
	// per object (its metadata and last verdict), well under the YAML.
	const fixed, perObject = 4 << 20, 16 << 10
	if limit := int64(fixed + objects*perObject); retained > limit {
		t.Errorf("retained %.1f MiB after installing %d objects (%.1f MiB of YAML), want at most %.1f MiB (4 MiB + 16 KiB per object)",
			float64(retained)/(1<<20), objects, float64(size)/(1<<20), float64(limit)/(1<<20))
	}
}

// idleHeap is the least live heap of three looks a second apart, so that
// what a background goroutine (a watch renewed, a lease) holds at one
// moment is not taken for kept.
func idleHeap() uint64 {
	least := liveHeap()
	for range 2 {
		time.Sleep(time.Second)
		least = min(least, liveHeap())
	}
	return least
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
