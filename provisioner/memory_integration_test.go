package provisioner_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/heapwatch"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testfiles"
	"github.com/rukpak-dev/rukpak/internal/testmetrics"
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

// The heap a provisioner keeps after installing a bundle of large real
// CRDs grows with the number of objects it installed, not with their size:
// the cache of installed objects holds their metadata only (before, the
// CRDs' 6 MiB of YAML left 18.5 MiB behind). RUKPAK_HEAP_PROFILE=file
// writes a heap profile after the install.
func TestIntegrationRetainedHeapOfLargeCRDs(t *testing.T) {
	// Not parallel: it measures the heap of this process, and waits for
	// every controller in it to go idle, which parallel tests would not.
	files, size := realCRDs(t)
	objects := len(files)
	h := newHarness(t)
	ctx := context.Background()
	src := h.pushBundle("big-crds", files)

	busy0 := busy(t)
	before := liveHeap()
	stop := heapwatch.Start()
	if err := h.c.Create(ctx, newBD("big-crds", src)); err != nil {
		t.Fatal(err)
	}
	h.waitBDExact("big-crds", rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "All installed objects are healthy")
	peak := stop()
	waitIdle(t, busy0)
	after := liveHeap()
	if out := os.Getenv("RUKPAK_HEAP_PROFILE"); out != "" {
		f, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.WriteHeapProfile(f); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	retained := int64(after) - int64(before)
	t.Logf("%d CRDs, %.1f MiB of YAML: live heap %.1f MiB before, %.1f MiB after (retained %+.1f MiB), peak growth %.1f MiB",
		objects, float64(size)/(1<<20), float64(before)/(1<<20), float64(after)/(1<<20), float64(retained)/(1<<20), float64(peak)/(1<<20))
	// A fixed part (informers, watches, metrics, events) and a small one
	// per object (its metadata and last verdict), well under the YAML.
	const fixed, perObject = 4 << 20, 16 << 10
	if limit := int64(fixed + objects*perObject); retained > limit {
		t.Errorf("retained %.1f MiB after installing %d objects (%.1f MiB of YAML), want at most %.1f MiB (4 MiB + 16 KiB per object)",
			float64(retained)/(1<<20), objects, float64(size)/(1<<20), float64(limit)/(1<<20))
	}
}
