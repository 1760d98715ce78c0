package crdupgrade

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/internal/heapwatch"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// TestIntegrationPreflightMemory validates RUKPAK_PREFLIGHT_OBJECTS small
// objects (100,000 for docs/benchmarks.md; the test is skipped when unset)
// on a real API server and reports the preflight's live-heap growth, which
// the page size bounds, not the number of objects.
func TestIntegrationPreflightMemory(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("RUKPAK_PREFLIGHT_OBJECTS"))
	if n <= 0 {
		t.Skip("set RUKPAK_PREFLIGHT_OBJECTS=100000 to measure")
	}
	env := testenv.Start(t)
	ctx := context.Background()
	old := crd(t, ns, []string{"v1"}, v1(baseSchema))
	if err := env.Client.Create(ctx, old.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	waitEstablished(t, env.Client, old.Name)

	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, -1
	writer, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var g errgroup.Group
	g.SetLimit(32)
	for i := range n {
		g.Go(func() error {
			mode := "a"
			if i%1000 == 999 {
				mode = "b" // one in a thousand breaks
			}
			return writer.Create(ctx, &unstructured.Unstructured{Object: widget(fmt.Sprintf("w-%06d", i), map[string]any{"mode": mode, "size": int64(i)})})
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	t.Logf("created %d objects in %s", n, time.Since(start).Round(time.Second))

	new := crd(t, ns, []string{"v1"}, v1(edit("      size: {type: integer}\n      mode: {type: string, enum: [a]}\n      name: {type: string}\n", "")))
	lister, err := NewRESTLister(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, pageSize := range []int64{500, 100} {
		var pages atomic.Int64
		l := countingLister{Lister: lister, pages: &pages}
		live := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: old.Name}, live); err != nil {
			t.Fatal(err)
		}
		var r *Report
		peak, allocs, took := heapwatch.Measure(func() {
			r, err = Compare(ctx, l, live, new, Options{PageSize: pageSize})
		})
		if err != nil {
			t.Fatal(err)
		}
		failed := r.Failed()
		if len(failed) != 1 || failed[0].Count != n/1000 || len(failed[0].Objects) != min(n/1000, 100) {
			t.Fatalf("findings: %v", failed)
		}
		t.Logf("page size %d: %d objects in %d pages, %s, live heap +%.1f MiB peak, %.0f MiB allocated",
			pageSize, n, pages.Load(), took.Round(100*time.Millisecond), float64(peak)/(1<<20), float64(allocs)/(1<<20))
		// Bounded by the page, not the objects: 100,000 objects decoded at
		// once would take hundreds of MiB.
		if peak > 64<<20 {
			t.Errorf("live heap grew by %d MiB", peak>>20)
		}
	}
}

type countingLister struct {
	Lister
	pages *atomic.Int64
}

func (c countingLister) ListJSON(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (io.ReadCloser, error) {
	c.pages.Add(1)
	return c.Lister.ListJSON(ctx, gvr, opts)
}
