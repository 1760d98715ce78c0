package memo

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

func configMaps(prefix string, n, valueBytes int) []*unstructured.Unstructured {
	var objs []*unstructured.Unstructured
	for i := range n {
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", prefix, i), "namespace": "default"},
			"data":     map[string]any{"value": strings.Repeat("x", valueBytes)},
		}})
	}
	return objs
}

func key(name string) Key {
	return Key{Content: ConfigKey([]byte("content " + name)), Decoder: "plain", Config: ConfigKey(nil)}
}

func TestCacheBound(t *testing.T) {
	small := configMaps("small", 2, 100)
	size := sizeOf(t, small)
	for _, tc := range []struct {
		name     string
		max      int64
		add      []string // keys added in order, each with small objects
		huge     bool     // then add one entry over a quarter of the bound
		kept     []string
		dropped  []string
		hugeKept bool
	}{
		{name: "all fit", max: 4 * size * 10, add: []string{"a", "b", "c"}, kept: []string{"a", "b", "c"}},
		{name: "least recently used evicted", max: 4 * size, add: []string{"a", "b", "c", "d", "e"}, kept: []string{"b", "c", "d", "e"}, dropped: []string{"a"}},
		{name: "over a quarter never kept, evicts nothing", max: 4 * size, add: []string{"a", "b", "c", "d"}, huge: true, kept: []string{"a", "b", "c", "d"}},
		{name: "zero bound keeps nothing", max: 0, add: []string{"a"}, dropped: []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tc.max)
			for _, k := range tc.add {
				c.Add(key(k), configMaps(k, 2, 100))
			}
			if tc.huge {
				huge := configMaps("huge", 20, 1000)
				if n := sizeOf(t, huge); n <= tc.max/4 {
					t.Fatalf("test objects of %d bytes are not over a quarter of %d", n, tc.max)
				}
				if c.Add(key("huge"), huge) {
					t.Error("an entry over a quarter of the bound was kept")
				}
				if c.Contains(key("huge")) {
					t.Error("an entry over a quarter of the bound is in the cache")
				}
			}
			for _, k := range tc.kept {
				if !c.Contains(key(k)) {
					t.Errorf("%s was evicted", k)
				}
			}
			for _, k := range tc.dropped {
				if c.Contains(key(k)) {
					t.Errorf("%s is still kept", k)
				}
			}
			if _, used := c.Stats(); used > tc.max && tc.max > 0 {
				t.Errorf("%d bytes kept, over the bound of %d", used, tc.max)
			}
		})
	}
}

func TestCacheGetRefreshes(t *testing.T) {
	size := sizeOf(t, configMaps("a", 2, 100))
	c := New(4 * size)
	for _, k := range []string{"a", "b", "c", "d"} {
		c.Add(key(k), configMaps(k, 2, 100))
	}
	got, ok := c.Get(key("a")) // a is now the most recently used
	if !ok || len(got) != 2 || got[0].GetName() != "a-0" {
		t.Fatalf("Get(a) = %v, %v", got, ok)
	}
	c.Add(key("e"), configMaps("e", 2, 100))
	if !c.Contains(key("a")) {
		t.Error("a, just read, was evicted")
	}
	if c.Contains(key("b")) {
		t.Error("b, the least recently used, is still kept")
	}

	// Callers get copies: changing what Get or Add saw changes nothing kept.
	got[0].SetName("changed")
	added := configMaps("f", 1, 10)
	c.Add(key("f"), added)
	added[0].SetName("changed too")
	for _, k := range []string{"a", "f"} {
		again, ok := c.Get(key(k))
		if !ok {
			t.Fatalf("%s not kept", k)
		}
		if n := again[0].GetName(); n != k+"-0" {
			t.Errorf("kept object of %s changed to %q", k, n)
		}
	}
	// Other keys of the same content: another decoder or config is a miss.
	other := key("a")
	other.Decoder = "registry"
	if _, ok := c.Get(other); ok {
		t.Error("a key of another decoder found the plain decoder's objects")
	}
	other = key("a")
	other.Config = ConfigKey([]byte(`{"watchNamespaces":["x"]}`))
	if _, ok := c.Get(other); ok {
		t.Error("a key of another config found the objects of no config")
	}
}

func TestDigestOf(t *testing.T) {
	base := func() []*unstructured.Unstructured { return configMaps("d", 2, 10) }
	want := Digest(base())
	if again := Digest(base()); again != want {
		t.Fatal("the same objects digest differently")
	}
	for name, change := range map[string]func([]*unstructured.Unstructured){
		"a value": func(o []*unstructured.Unstructured) { o[1].Object["data"].(map[string]any)["value"] = "y" },
		"a key": func(o []*unstructured.Unstructured) {
			o[0].Object["data"] = map[string]any{"value2": strings.Repeat("x", 10)}
		},
		"a type, same text":    func(o []*unstructured.Unstructured) { o[0].Object["data"].(map[string]any)["n"] = int64(1) },
		"an int as a string":   func(o []*unstructured.Unstructured) { o[0].Object["data"].(map[string]any)["n"] = "1" },
		"the order of objects": func(o []*unstructured.Unstructured) { o[0], o[1] = o[1], o[0] },
		"an object fewer":      func(o []*unstructured.Unstructured) { o[1] = nil },
		"a list element":       func(o []*unstructured.Unstructured) { o[0].Object["list"] = []any{"a", "b"} },
		"a bool":               func(o []*unstructured.Unstructured) { o[0].Object["b"] = false },
		"a float":              func(o []*unstructured.Unstructured) { o[0].Object["f"] = 1.5 },
		"key/value boundary":   func(o []*unstructured.Unstructured) { o[0].Object["ab"] = "c" },
		"nested map keys sorted": func(o []*unstructured.Unstructured) {
			o[0].Object["metadata"].(map[string]any)["zz"] = map[string]any{"a": "1"}
		},
	} {
		objs := base()
		change(objs)
		if Digest(objs) == want {
			t.Errorf("changing %s left the digest as it was", name)
		}
	}
	// Neighbouring values that a naive concatenation would confuse.
	a := []*unstructured.Unstructured{{Object: map[string]any{"ab": "c"}}}
	b := []*unstructured.Unstructured{{Object: map[string]any{"a": "bc"}}}
	if Digest(a) == Digest(b) {
		t.Error(`{"ab":"c"} and {"a":"bc"} digest alike`)
	}
	// A type decoding never produces matches nothing, not even itself:
	// printed, these two maps are both map[a:b c:d].
	odd := func(m map[string]string) []*unstructured.Unstructured {
		return []*unstructured.Unstructured{{Object: map[string]any{"data": m}}}
	}
	if Digest(odd(map[string]string{"a": "b c:d"})) == Digest(odd(map[string]string{"a": "b", "c": "d"})) {
		t.Error("two maps of strings that print alike digest alike")
	}
	same := odd(map[string]string{"a": "b"})
	if first := Digest(same); Digest(same) == first {
		t.Error("a value of a type decoding never produces digests as itself again")
	}
	// Map iteration order does not matter: many keys, digested many times.
	many := map[string]any{}
	for i := range 50 {
		many[fmt.Sprint(i)] = map[string]any{"x": int64(i), "y": []any{"a", map[string]any{"z": true}}}
	}
	first := Digest([]*unstructured.Unstructured{{Object: many}})
	for range 20 {
		if Digest([]*unstructured.Unstructured{{Object: many}}) != first {
			t.Fatal("the same map digests differently")
		}
	}
}

func BenchmarkDigest(b *testing.B) {
	objs := configMaps("b", 100, 1000)
	b.ReportAllocs()
	for b.Loop() {
		Digest(objs)
	}
}

// sizeOf is what an entry of objs counts against the bound.
func sizeOf(t *testing.T, objs []*unstructured.Unstructured) int64 {
	t.Helper()
	e, err := encode(objs, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	// The entry was measured before it was written, exactly: its objects
	// fill one buffer, the first's capacity.
	written := 0
	for _, o := range e.objects {
		written += len(o)
	}
	if len(e.objects) > 0 && written != cap(e.objects[0]) {
		t.Errorf("measured %d bytes of JSON, wrote %d", cap(e.objects[0]), written)
	}
	return e.size()
}

// What a hit returns is what the decoder returned: every JSON type as
// apimachinery decodes it, with the same digest, and a value JSON cannot
// hold is not kept.
func TestRoundTrip(t *testing.T) {
	decoded := func() []*unstructured.Unstructured {
		return []*unstructured.Unstructured{{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "x", "labels": map[string]any{"a": "<&>"}},
			"spec": map[string]any{
				"int": int64(-3), "big": int64(math.MaxInt64), "float": 1.5, "whole": 2.0, "huge": 1e300,
				"million": 2e6, "e21": 1e21, "2^62": float64(1 << 62), "int 2^62": int64(1 << 62), "-0": math.Copysign(0, -1),
				"nil map": map[string]any(nil), "nil list": []any(nil),
				"bool": true, "null": nil, "list": []any{"a", int64(1), map[string]any{"z": false}, []any{}},
				"empty": map[string]any{}, "unicode": "é\u2028\x00",
			},
		}}}
	}
	sizeOf(t, decoded())
	// A nil object is kept as null, and comes back so.
	withNil := append(decoded(), nil)
	if sizeOf(t, withNil); !New(1<<20).Add(key("nil"), withNil) {
		t.Error("objects with a nil one not kept")
	}
	c := New(1 << 20)
	if !c.Add(key("a"), decoded()) {
		t.Fatal("not kept")
	}
	got, ok := c.Get(key("a"))
	if !ok {
		t.Fatal("not found")
	}
	want := decoded()
	// The one change: a nil map or list is null in JSON, and comes back so.
	spec := want[0].Object["spec"].(map[string]any)
	spec["nil map"], spec["nil list"] = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip changed the objects:\n got %#v\nwant %#v", got[0].Object, want[0].Object)
	}
	// Every number keeps its type (an int64 of the same value would make
	// the apply send other JSON), and -0 its sign.
	gotSpec := got[0].Object["spec"].(map[string]any)
	for k, v := range spec {
		if fmt.Sprintf("%T", gotSpec[k]) != fmt.Sprintf("%T", v) {
			t.Errorf("%s: %T came back as %T", k, v, gotSpec[k])
		}
	}
	if z := gotSpec["-0"].(float64); !math.Signbit(z) {
		t.Error("-0 came back as 0")
	}
	if Digest(got) != Digest(decoded()) {
		t.Error("the objects a hit returns digest differently from the decoded ones")
	}

	// What the API server receives differs, so the digests do.
	for _, pair := range [][2]any{{int64(1 << 62), float64(1 << 62)}, {int64(2), 2.0}, {map[string]any(nil), map[string]any{}}} {
		a, b := configMaps("n", 1, 1), configMaps("n", 1, 1)
		a[0].Object["n"], b[0].Object["n"] = pair[0], pair[1]
		if Digest(a) == Digest(b) {
			t.Errorf("%#v and %#v digest alike", pair[0], pair[1])
		}
	}

	for name, v := range map[string]any{"NaN": math.NaN(), "infinity": math.Inf(1), "a channel": make(chan int), "an int": 1, "not UTF-8": "\xff"} {
		objs := configMaps("bad", 1, 1)
		objs[0].Object["data"].(map[string]any)["v"] = v
		if c.Add(key(name), objs) || c.Contains(key(name)) {
			t.Errorf("objects holding %s were kept", name)
		}
	}
}

// The bound counts the JSON the cache holds: the real fleet's sixty
// operators, decoded, take their JSON's size (json.Marshal's, which also
// escapes <, > and &) within a tenth.
func TestSizeIsTheJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("reads the shared fleet")
	}
	files, err := filepath.Glob(filepath.Join(testenv.SharedTestdata("fleet"), "*", "manifests", "*.yaml"))
	if err != nil || len(files) < 100 {
		t.Fatalf("%d fleet manifests (%v)", len(files), err)
	}
	var objs []*unstructured.Unstructured
	var jsonBytes int64
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(data, &m); err != nil || m == nil {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
		j, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		jsonBytes += int64(len(j)) + 1
	}
	sizeOf(t, objs) // measured exactly
	c := New(1 << 30)
	if !c.Add(key("fleet"), objs) {
		t.Fatal("not kept")
	}
	_, size := c.Stats()
	t.Logf("%d objects: %.1f MB of JSON, kept as %.1f MB", len(objs), float64(jsonBytes)/1e6, float64(size)/1e6)
	if float64(size) < 0.9*float64(jsonBytes) || float64(size) > 1.1*float64(jsonBytes) {
		t.Errorf("kept %d bytes for %d bytes of JSON", size, jsonBytes)
	}
	got, ok := c.Get(key("fleet"))
	if !ok || len(got) != len(objs) || Digest(got) != Digest(objs) {
		t.Errorf("the fleet's objects did not come back as they were (%d of %d)", len(got), len(objs))
	}
}

// heapOf is what the tests say handed-over objects hold: four times their
// JSON, about what small real objects take.
func heapOf(data [][]byte) int64 {
	n := 0
	for _, d := range data {
		n += len(d)
	}
	return int64(4 * n)
}

// TestPrime: objects handed over are what the first Get returns, as they
// are; later Gets decode their JSON to equal objects the caller owns; the
// entry counts their decoded form against the bound until taken, and the
// JSON alone if that is all that fits.
func TestPrime(t *testing.T) {
	primed := func(prefix string, n, valueBytes int) ([][]byte, []*unstructured.Unstructured) {
		objs := configMaps(prefix, n, valueBytes)
		data := make([][]byte, len(objs))
		for i, o := range objs {
			b, err := json.Marshal(o.Object)
			if err != nil {
				t.Fatal(err)
			}
			data[i] = append(b, '\n')
		}
		return data, objs
	}
	c := New(1 << 20)
	data, objs := primed("p", 3, 100)
	if !c.Prime(key("p"), data, objs, heapOf(data)) {
		t.Fatal("not primed")
	}
	_, used := c.Stats()
	got, ok := c.Get(key("p"))
	if !ok || len(got) != 3 || got[0] != objs[0] || reflect.ValueOf(got[1].Object).UnsafePointer() != reflect.ValueOf(objs[1].Object).UnsafePointer() {
		t.Fatalf("the first Get did not return the handed-over objects (%v)", ok)
	}
	// Their JSON (and its newlines), not the objects, counts.
	if _, after := c.Stats(); after != used || used != sizeOf(t, objs)+int64(len(objs)) {
		t.Errorf("kept %d bytes, %d once the objects were taken: want their JSON, %d, both times", used, after, sizeOf(t, objs)+int64(len(objs)))
	}
	got[0].SetName("changed")
	again, ok := c.Get(key("p"))
	if !ok {
		t.Fatal("the entry is gone after its objects were taken")
	}
	for i := range again {
		if again[i] == objs[i] {
			t.Fatalf("object %d handed out twice", i)
		}
		want := configMaps("p", 3, 100)[i].Object
		if !reflect.DeepEqual(again[i].Object, want) {
			t.Errorf("object %d decoded again as %v, want %v", i, again[i].Object, want)
		}
	}
	// Primed again, or added, under a kept key: nothing replaced.
	data2, objs2 := primed("q", 3, 100)
	if c.Prime(key("p"), data2, objs2, heapOf(data2)) {
		t.Error("a kept key primed again")
	}
	if again, _ := c.Get(key("p")); again[0].GetName() != "p-0" {
		t.Errorf("a kept entry replaced: %s", again[0].GetName())
	}
	// Objects whose decoded form is over a quarter of the bound but whose
	// JSON is not: kept as JSON alone.
	small := New(4 * (sizeOf(t, configMaps("b", 4, 1000)) + 512))
	data, objs = primed("b", 4, 1000)
	if !small.Prime(key("b"), data, objs, heapOf(data)) {
		t.Fatal("objects whose JSON fits were not kept")
	}
	if got, _ := small.Get(key("b")); got[0] == objs[0] {
		t.Error("objects over the bound kept as they are")
	}
	// Handed-over objects beyond their bound: newer ones are kept as JSON
	// alone while the older ones wait less than ownedWait, and take the
	// room of those that waited longer.
	one := sizeOf(t, configMaps("o", 4, 1000))
	bounded := New(20 * one / ownedShare)
	now := time.Unix(1000, 0)
	bounded.now = func() time.Time { return now }
	handed := map[string][]*unstructured.Unstructured{}
	prime := func(i int) {
		k := fmt.Sprint("o", i)
		data, objs := primed(k, 4, 1000)
		if !bounded.Prime(key(k), data, objs, heapOf(data)) {
			t.Fatalf("%s not primed", k)
		}
		handed[k] = objs
	}
	takenOf := func(from, to int) []int {
		var taken []int
		for i := from; i < to; i++ {
			k := fmt.Sprint("o", i)
			got, ok := bounded.Get(key(k))
			if !ok {
				t.Fatalf("%s not kept", k)
			}
			if got[0] == handed[k][0] {
				taken = append(taken, i)
			} else if !reflect.DeepEqual(got[0].Object, handed[k][0].Object) {
				t.Errorf("%s decoded as %v", k, got[0].Object)
			}
		}
		return taken
	}
	for i := range 7 {
		prime(i)
	}
	// Each counts about 4 × its JSON: 20 × one holds five.
	if got := takenOf(5, 7); got != nil {
		t.Errorf("primed beyond the bound, handed over anyway: %v", got)
	}
	now = now.Add(ownedWait + time.Second)
	prime(7) // lets go of 0, the oldest
	prime(8) // and 1
	if got := fmt.Sprint(takenOf(0, 9)); got != "[2 3 4 7 8]" {
		t.Errorf("primed entries that handed their objects over: %s, want [2 3 4 7 8]", got)
	}
	// Objects nobody takes are let go after ownedExpiry, room or not.
	data, objs = primed("e", 1, 10)
	if !bounded.Prime(key("e"), data, objs, heapOf(data)) {
		t.Fatal("e not primed")
	}
	now = now.Add(ownedExpiry)
	bounded.Get(key("o8")) // any Get lets go of what expired
	if got, _ := bounded.Get(key("e")); got[0] == objs[0] {
		t.Error("objects waiting past ownedExpiry still handed over")
	}
	// Mismatched lengths and a zero bound: nothing kept.
	if c.Prime(key("x"), data2[:1], objs2, heapOf(data2)) || New(0).Prime(key("x"), data, objs, heapOf(data)) {
		t.Error("primed with mismatched data or no room")
	}
}
