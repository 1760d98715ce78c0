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
