package crdupgrade

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rukpak-dev/rukpak/internal/heapwatch"
)

// shapes are objects of ~0.8 MiB whose decoding costs differ: one long
// string, and the same bytes as many small maps, list items or numbers.
func shapes() map[string]map[string]any {
	const size = 800 << 10
	maps := make([]any, size/len(`{"a":"b"},`))
	for i := range maps {
		maps[i] = map[string]any{"a": "b"}
	}
	ints := make([]any, size/len(`1,`))
	for i := range ints {
		ints[i] = int64(1)
	}
	nested := map[string]any{}
	for i := range size / len(`"k000000":{"x":1},`) {
		nested[fmt.Sprintf("k%06d", i)] = map[string]any{"x": int64(1)}
	}
	lists := make([]any, size/len(`[1],`))
	for i := range lists {
		lists[i] = []any{int64(1)}
	}
	keys := map[string]any{}
	for i := range size / len(`"k000000":1,`) {
		keys[fmt.Sprintf("k%06d", i)] = int64(1)
	}
	return map[string]map[string]any{
		"lists":  widget("lists", map[string]any{"mode": "b", "items": lists}),
		"keys":   widget("keys", map[string]any{"mode": "b", "nested": keys}),
		"string": widget("string", map[string]any{"mode": "b", "name": strings.Repeat("x", size)}),
		"maps":   widget("maps", map[string]any{"mode": "b", "items": maps}),
		"ints":   widget("ints", map[string]any{"mode": "b", "items": ints}),
		"nested": widget("nested", map[string]any{"mode": "b", "nested": nested}),
	}
}

// The cost an object is charged covers the live heap its decoding and
// validation take, for every shape (the schema change makes every object
// validated against both schemas and pruned).
func TestCostBoundsHeap(t *testing.T) {
	old := crd(t, ns, []string{"v1"}, v1(edit("      mode: {type: string}\n      name: {type: string}\n      items: {type: array, items: {x-kubernetes-preserve-unknown-fields: true}}\n      nested: {type: object, x-kubernetes-preserve-unknown-fields: true}\n", "")))
	new := crd(t, ns, []string{"v1"}, v1(edit("      mode: {type: string, enum: [a]}\n      name: {type: string}\n      items: {type: array, items: {x-kubernetes-preserve-unknown-fields: true}}\n      nested: {type: object, x-kubernetes-preserve-unknown-fields: true}\n", "")))
	for name, obj := range shapes() {
		raw, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		l := encodedLister(t, []map[string]any{obj})
		var r *Report
		peak, _, _ := heapwatch.Measure(func() {
			r, err = Compare(context.Background(), l, old, new, Options{Budget: NewBudget(1 << 40)})
		})
		if err != nil {
			t.Fatal(err)
		}
		if f := r.Failed(); len(f) != 1 || f[0].Count != 1 {
			t.Fatalf("%s: findings %v", name, f)
		}
		c := cost(raw)
		t.Logf("%s: %d KiB of JSON, live heap +%.1f MiB, charged %.1f MiB", name, len(raw)>>10, float64(peak)/(1<<20), float64(c)/(1<<20))
		if int64(peak) > c {
			t.Errorf("%s: live heap grew by %d KiB, more than its cost %d KiB", name, peak>>10, c>>10)
		}
	}
}

// fixedLister serves pages encoded in advance, so that measuring a check
// does not count encoding them.
type fixedLister struct{ pages [][]byte }

func (l fixedLister) ListJSON(_ context.Context, _ schema.GroupVersionResource, opts metav1.ListOptions) (io.ReadCloser, error) {
	i := 0
	if opts.Continue != "" {
		i, _ = strconv.Atoi(opts.Continue)
	}
	return io.NopCloser(bytes.NewReader(l.pages[i])), nil
}

// encodedLister serves objs one per page.
func encodedLister(t *testing.T, objs []map[string]any) fixedLister {
	t.Helper()
	var l fixedLister
	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	for i := range objs {
		body, err := listJSON(gvr, objs[i:i+1], i+1, len(objs))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(body)
		l.pages = append(l.pages, b)
	}
	return l
}

func padded(name string, n int) map[string]any {
	return widget(name, map[string]any{"mode": "b", "name": strings.Repeat("x", n)})
}

// A check that would exceed a bound fails with a BudgetError naming the
// object, the bound and its flag, before the object is decoded.
func TestBudgetErrors(t *testing.T) {
	manyMaps := make([]any, 10<<10)
	for i := range manyMaps {
		manyMaps[i] = map[string]any{"a": "b"}
	}
	for _, tc := range []struct {
		name string
		objs []map[string]any
		opts Options
		want string
	}{{
		name: "an object too large to buffer is named from its beginning",
		objs: []map[string]any{padded("small", 10), padded("big", 200<<10)},
		opts: Options{MaxObjectBytes: 64 << 10},
		want: "object default/big is larger than the limit of 64 KiB (--crd-preflight-max-object-bytes)",
	}, {
		name: "an object just over the bound",
		objs: []map[string]any{padded("small", 10), padded("big", 65<<10)},
		opts: Options{MaxObjectBytes: 64 << 10},
		want: "object default/big is 65.1 KiB, more than the limit of 64 KiB (--crd-preflight-max-object-bytes)",
	}, {
		name: "too many bytes in all",
		objs: []map[string]any{padded("a", 40<<10), padded("b", 40<<10), padded("c", 40<<10)},
		opts: Options{MaxBytes: 100 << 10},
		want: "the objects read so far take 120.4 KiB, more than the limit of 100 KiB (--crd-preflight-max-bytes)",
	}, {
		name: "an object that alone would take more than the memory budget",
		objs: []map[string]any{padded("small", 10), widget("maps", map[string]any{"mode": "b", "items": manyMaps})},
		opts: Options{Budget: NewBudget(8 << 20)},
		want: "object default/maps (100.1 KiB) would take about 23.7 MiB to decode and validate, more than the limit of 8 MiB (--crd-preflight-memory-bytes)",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			old := crd(t, ns, []string{"v1"}, v1(edit("      mode: {type: string}\n      name: {type: string}\n      items: {type: array, items: {x-kubernetes-preserve-unknown-fields: true}}\n", "")))
			new := crd(t, ns, []string{"v1"}, v1(edit("      mode: {type: string, enum: [a]}\n      name: {type: string}\n      items: {type: array, items: {x-kubernetes-preserve-unknown-fields: true}}\n", "")))
			_, err := Compare(context.Background(), &pagedLister{objs: tc.objs}, old, new, tc.opts)
			want := "checking the objects of CRD widgets.example.com at version v1: " + tc.want
			if err == nil || err.Error() != want || !IsBudget(err) {
				t.Errorf("error:\n got %v\nwant %s", err, want)
			}
		})
	}
}

// Pages ask for PageBytes of objects at the largest size seen so far (at
// MaxObjectBytes before any), at most PageSize of them.
func TestPageLimits(t *testing.T) {
	var objs []map[string]any
	for i := range 10 {
		objs = append(objs, padded(fmt.Sprintf("w%d", i), 300<<10))
	}
	l := &pagedLister{objs: objs}
	old := crd(t, ns, []string{"v1"}, v1(baseSchema))
	new := crd(t, ns, []string{"v1"}, v1(edit("      mode: {type: string, enum: [a]}\n      name: {type: string}\n", "")))
	r, err := Compare(context.Background(), l, old, new, Options{PageBytes: 1 << 20, MaxObjectBytes: 512 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if f := r.Failed(); len(f) != 1 || f[0].Count != 10 {
		t.Fatalf("findings %v", f)
	}
	if got, want := fmt.Sprint(l.limits), "[2 3 3 3]"; got != want {
		t.Errorf("page limits %s, want %s", got, want)
	}
}

// Checks share their Budget: while others hold it all, a check waits (here
// until its timeout), and proceeds once they release it.
func TestSharedBudget(t *testing.T) {
	ctx := context.Background()
	b := NewBudget(8 << 20)
	if err := b.sem.Acquire(ctx, 8<<20); err != nil {
		t.Fatal(err)
	}
	old := crd(t, ns, []string{"v1"}, v1(baseSchema))
	new := crd(t, ns, []string{"v1"}, v1(edit("      mode: {type: string, enum: [a]}\n      name: {type: string}\n", "")))
	objs := []map[string]any{padded("w", 10)}
	_, err := Compare(ctx, &pagedLister{objs: objs}, old, new, Options{Budget: b, Timeout: 50 * time.Millisecond})
	want := "checking the objects of CRD widgets.example.com at version v1: checking the objects took longer than 50ms"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
	b.sem.Release(8 << 20)
	r, err := Compare(ctx, &pagedLister{objs: objs}, old, new, Options{Budget: b})
	if err != nil {
		t.Fatal(err)
	}
	if f := r.Failed(); len(f) != 1 || f[0].Count != 1 {
		t.Errorf("findings %v", f)
	}
}

// MaxBytes bounds all the objects read to check one CRD, over every
// version checked: here 3 objects of 40 KiB read for v1 and again for a
// new v2.
func TestMaxBytesAcrossVersions(t *testing.T) {
	narrow := edit("      mode: {type: string, enum: [a]}\n      name: {type: string}\n", "")
	old := crd(t, ns, []string{"v1"}, v1(baseSchema))
	new := crd(t, ns, []string{"v1"}, v1(narrow), version{name: "v2", served: true, schema: narrow})
	objs := []map[string]any{padded("a", 40<<10), padded("b", 40<<10), padded("c", 40<<10)}
	_, err := Compare(context.Background(), &pagedLister{objs: objs}, old, new, Options{MaxBytes: 200 << 10})
	want := "checking the objects of CRD widgets.example.com at version v1: the objects read so far take 200.6 KiB, more than the limit of 200 KiB (--crd-preflight-max-bytes)"
	if err == nil || err.Error() != want {
		t.Errorf("error:\n got %v\nwant %s", err, want)
	}
}
