package memo

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

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
	return Key{Content: ConfigKey([]byte("content " + name)), Class: "plain", Config: ConfigKey(nil)}
}

func TestCacheBound(t *testing.T) {
	small := configMaps("small", 2, 100)
	size := SizeOf(small)
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
				if SizeOf(huge) <= tc.max/4 {
					t.Fatalf("test objects of %d bytes are not over a quarter of %d", SizeOf(huge), tc.max)
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
	size := SizeOf(configMaps("a", 2, 100))
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
	// Other keys of the same content: another class or config is a miss.
	other := key("a")
	other.Class = "registry"
	if _, ok := c.Get(other); ok {
		t.Error("a key of another class found the plain class's objects")
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

func TestSizeOfGrowsWithContent(t *testing.T) {
	prev := SizeOf(nil)
	for _, objs := range [][]*unstructured.Unstructured{
		configMaps("s", 1, 0),
		configMaps("s", 1, 100),
		configMaps("s", 2, 100),
		configMaps("s", 2, 10000),
		configMaps("s", 20, 10000),
	} {
		n := SizeOf(objs)
		if n <= prev {
			t.Errorf("SizeOf = %d, not more than %d for more content", n, prev)
		}
		prev = n
	}
	// At least the bytes of the strings it holds.
	if n := SizeOf(configMaps("s", 20, 10000)); n < 20*10000 {
		t.Errorf("SizeOf = %d, less than the 200,000 bytes of values", n)
	}
}

func BenchmarkDigest(b *testing.B) {
	objs := configMaps("b", 100, 1000)
	b.ReportAllocs()
	for b.Loop() {
		Digest(objs)
	}
}

// SizeOf is close to what the runtime reports for real manifests (the
// fleet's sixty operators), so the cache's bound is one in bytes of heap.
// Not parallel: it measures this process's heap.
func TestSizeOfMatchesTheHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("reads the shared fleet")
	}
	files, err := filepath.Glob(filepath.Join(testenv.SharedTestdata("fleet"), "*", "manifests", "*.yaml"))
	if err != nil || len(files) < 100 {
		t.Fatalf("%d fleet manifests (%v)", len(files), err)
	}
	var objs []*unstructured.Unstructured
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
	}
	const copies = 3
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := make([][]*unstructured.Unstructured, copies)
	for i := range kept {
		// Strings copied too: once the decoder's objects are gone, the
		// cache's are the only reference to them.
		kept[i] = make([]*unstructured.Unstructured, len(objs))
		for j, o := range objs {
			kept[i][j] = &unstructured.Unstructured{Object: copyAll(o.Object).(map[string]any)}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := float64(after.HeapAlloc-before.HeapAlloc) / copies
	ratio := float64(SizeOf(objs)) / heap
	t.Logf("%d objects: %.1f MB of heap each copy, SizeOf %.1f MB (%.2f×)", len(objs), heap/1e6, float64(SizeOf(objs))/1e6, ratio)
	if ratio < 0.8 || ratio > 1.25 {
		t.Errorf("SizeOf is %.2f× the heap the objects hold, want within 0.8–1.25×", ratio)
	}
	runtime.KeepAlive(kept)
}

func copyAll(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[strings.Clone(k)] = copyAll(e)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, e := range v {
			s[i] = copyAll(e)
		}
		return s
	case string:
		return strings.Clone(v)
	default:
		return v
	}
}
