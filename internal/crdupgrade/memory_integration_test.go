package crdupgrade

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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
	env := testenv.Pooled(t)
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

// TestIntegrationPreflightHostileObjects checks a CRD upgrade against
// objects that a user who may create custom resources makes as large as
// the API server allows: 60 objects of 0.8 MiB (a string field; 48 MiB in
// all) pass with the live heap growing by at most 64 MiB, read one at a
// time; then 3 of 0.8 MiB made of 80,000 small maps each (each alone
// would take ~150 MiB to validate) fail the check with a BudgetError,
// before any is decoded. Listing pages of whole objects instead grew the
// heap by hundreds of MiB.
func TestIntegrationPreflightHostileObjects(t *testing.T) {
	env := testenv.Pooled(t)
	ctx := context.Background()
	props := "      mode: {type: string, enum: [a, b]}\n      pad: {type: string}\n      items: {type: array, items: {x-kubernetes-preserve-unknown-fields: true}}\n"
	old := crd(t, ns, []string{"v1"}, v1(edit(props, "")))
	if err := env.Client.Create(ctx, old.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	waitEstablished(t, env.Client, old.Name)
	// The upgrade narrows mode, which every object passes.
	new := crd(t, ns, []string{"v1"}, v1(edit(strings.Replace(props, "[a, b]", "[a]", 1), "")))
	lister, err := NewRESTLister(env.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	create := func(objs ...map[string]any) {
		t.Helper()
		var g errgroup.Group
		g.SetLimit(4)
		for _, o := range objs {
			g.Go(func() error {
				// A loaded API server may time out on large objects; the
				// create may have gone through anyway.
				var err error
				for range 5 {
					err = env.Client.Create(ctx, &unstructured.Unstructured{Object: runtime.DeepCopyJSON(o)})
					if apierrors.IsAlreadyExists(err) {
						return nil
					}
					if !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err) && !apierrors.IsTooManyRequests(err) {
						return err
					}
				}
				return err
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	run := func() ([]*Report, uint64, error) {
		p := &Preflight{CRDs: env.Client, Objects: lister}
		var (
			reports []*Report
			err     error
		)
		peak, allocs, took := heapwatch.Measure(func() {
			next := &unstructured.Unstructured{}
			next.Object, err = runtimeToUnstructured(new)
			if err != nil {
				return
			}
			reports, err = p.Run(ctx, []*unstructured.Unstructured{next})
		})
		t.Logf("live heap +%.1f MiB peak, %.0f MiB allocated, %s", float64(peak)/(1<<20), float64(allocs)/(1<<20), took.Round(100*time.Millisecond))
		return reports, peak, err
	}

	t.Run("60 objects of 0.8 MiB pass in bounded memory", func(t *testing.T) {
		var objs []map[string]any
		for i := range 60 {
			objs = append(objs, widget(fmt.Sprintf("big-%02d", i), map[string]any{"mode": "a", "pad": strings.Repeat("x", 800<<10)}))
		}
		create(objs...)
		reports, peak, err := run()
		if err != nil {
			t.Fatal(err)
		}
		if len(reports) != 1 || len(reports[0].Failed()) != 0 {
			t.Fatalf("reports %v", reports)
		}
		if peak > 64<<20 {
			t.Errorf("live heap grew by %d MiB, more than 64 MiB", peak>>20)
		}
	})

	t.Run("objects too costly to validate fail the check", func(t *testing.T) {
		maps := make([]any, 80<<10)
		for i := range maps {
			maps[i] = map[string]any{"a": "b"}
		}
		create(widget("maps-1", map[string]any{"mode": "a", "items": maps}),
			widget("maps-2", map[string]any{"mode": "a", "items": maps}),
			widget("maps-3", map[string]any{"mode": "a", "items": maps}))
		_, peak, err := run()
		t.Logf("error: %v", err)
		want := regexp.MustCompile(`^checking the objects of CRD widgets\.example\.com at version v1: object default/maps-1 \(800\.[0-9] KiB\) would take about 1[0-9][0-9]\.[0-9] MiB to decode and validate, more than the limit of 48 MiB \(--crd-preflight-memory-bytes\)$`)
		if err == nil || !want.MatchString(err.Error()) || !IsBudget(err) {
			t.Errorf("error %v, want one matching %s", err, want)
		}
		if peak > 64<<20 {
			t.Errorf("live heap grew by %d MiB, more than 64 MiB", peak>>20)
		}
	})
}

type countingLister struct {
	Lister
	pages *atomic.Int64
}

func (c countingLister) ListJSON(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (io.ReadCloser, error) {
	c.pages.Add(1)
	return c.Lister.ListJSON(ctx, gvr, opts)
}
