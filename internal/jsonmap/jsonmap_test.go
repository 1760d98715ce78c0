package jsonmap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// same checks that Unmarshal, UnmarshalLive and UnmarshalLiveStatus answer
// data exactly as util/json does (live: without metadata.managedFields;
// status: with only apiVersion, kind, metadata and status), and whether this
// package's decoder answered it itself.
func same(t testing.TB, data []byte) (fast bool) {
	t.Helper()
	var want map[string]any
	wantErr := utiljson.Unmarshal(data, &want)
	got, err := Unmarshal(data)
	if (err != nil) != (wantErr != nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("%q: error %v, util/json's %v", data, err, wantErr)
	}
	if wantErr != nil {
		want = nil
	}
	if !reflect.DeepEqual(got, want) || (got == nil) != (want == nil) {
		t.Fatalf("%q:\n got %#v\nwant %#v", data, got, want)
	}
	live, err := UnmarshalLive(data)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q: live error %v, util/json's %v", data, err, wantErr)
	}
	if md, ok := want["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
	}
	if !reflect.DeepEqual(live, want) {
		t.Fatalf("%q: live:\n got %#v\nwant %#v", data, live, want)
	}
	status, err := UnmarshalLiveStatus(data)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q: status error %v, util/json's %v", data, err, wantErr)
	}
	for k := range want {
		if k != "apiVersion" && k != "kind" && k != "metadata" && k != "status" {
			delete(want, k)
		}
	}
	if !reflect.DeepEqual(status, want) {
		t.Fatalf("%q: status:\n got %#v\nwant %#v", data, status, want)
	}
	_, fast = decode(data, whole)
	if _, statusFast := decode(data, liveStatus); fast && !statusFast {
		t.Fatalf("%q: decoded here whole, but not without its spec", data)
	}
	return fast
}

func TestUnmarshal(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		// fast: decoded here, not by util/json.
		fast bool
	}{
		{"null", `null`, true},
		{"empty object", ` {} `, true},
		{"scalars", `{"s":"x","i":42,"neg":-7,"zero":0,"negzero":-0,"t":true,"f":false,"n":null}`, true},
		{"nested", `{"a":{"b":[1,"two",{"c":[]},[],{}],"d":{}}}`, true},
		{"floats", `{"a":1.5,"b":1e3,"c":1E-3,"d":-0.0,"e":2.50,"f":1e+2}`, true},
		{"int64 bounds", `{"max":9223372036854775807,"min":-9223372036854775808}`, true},
		{"beyond int64", `{"a":9223372036854775808,"b":-9223372036854775809,"c":123456789012345678901234567890}`, true},
		{"eighteen digits", `{"a":999999999999999999,"b":-999999999999999999}`, true},
		{"float out of range", `{"a":1e400}`, false},
		{"repeated key", `{"a":1,"b":2,"a":3}`, true},
		{"escapes", `{"e\"k":"a\\b\/c\bd\fe\nf\rg\th\u00e9\u4e2d"}`, true},
		{"surrogate pair", `{"s":"\ud83d\ude00"}`, true},
		{"lone surrogates", `{"a":"\ud83d","b":"\ude00x","c":"\ud83d\u0041","d":"\ud83dx"}`, true},
		{"utf-8", `{"k":"héllo 中文 😀"}`, true},
		{"invalid utf-8", "{\"k\":\"a\xffb\xc3\",\"\xfe\":1}", true},
		{"encoded replacement char", "{\"k\":\"\xef\xbf\xbd\"}", true},
		{"whitespace", " \t\r\n{ \"a\" : [ 1 , 2 ] , \"b\" :{ } }\n", true},
		{"long strings", `{"k":"` + strings.Repeat("x", 100) + `","` + strings.Repeat("y", 100) + `":1}`, true},
		{"managed fields", `{"metadata":{"name":"x","managedFields":[{"manager":"m","fieldsV1":{"f:a":{}}}]},"spec":{"managedFields":1}}`, true},
		{"status only", `{"apiVersion":"v1","kind":"K","metadata":{"name":"x"},"spec":{"l":[1,"a",{"b":null}],"e":"\u00e9"},"status":{"conditions":[]},"webhooks":[true]}`, true},
		{"status only, spec out of range", `{"metadata":{"name":"x"},"spec":{"a":1e999},"status":{}}`, false},
		{"metadata not an object", `{"metadata":[1],"managedFields":2}`, true},
		{"managed fields invalid", `{"metadata":{"managedFields":[1,}]}}`, false},
		{"managed fields bad number", `{"metadata":{"managedFields":[1e999]}}`, false},

		{"empty", ``, false},
		{"space only", `  `, false},
		{"array", `[1]`, false},
		{"string", `"x"`, false},
		{"number", `1`, false},
		{"trailing", `{} x`, false},
		{"two values", `{}{}`, false},
		{"trailing comma", `{"a":1,}`, false},
		{"missing colon", `{"a" 1}`, false},
		{"unquoted key", `{a:1}`, false},
		{"single quotes", `{'a':1}`, false},
		{"control char", "{\"a\":\"x\ny\"}", false},
		{"bad escape", `{"a":"\x"}`, false},
		{"short unicode escape", `{"a":"\u12"}`, false},
		{"leading zero", `{"a":01}`, false},
		{"leading plus", `{"a":+1}`, false},
		{"bare minus", `{"a":-}`, false},
		{"bare dot", `{"a":1.}`, false},
		{"bare exponent", `{"a":1e}`, false},
		{"nan", `{"a":NaN}`, false},
		{"truncated", `{"a":[1,2`, false},
		{"truncated literal", `{"a":tru}`, false},
		{"literal run-on", `{"a":truex}`, false},
		{"unclosed string", `{"a":"x`, false},
		{"byte order mark", "\xef\xbb\xbf{}", false},
		{"deep but allowed", strings.Repeat(`{"a":`, 500) + `1` + strings.Repeat(`}`, 500), false},
		{"too deep", strings.Repeat(`[`, 10001) + strings.Repeat(`]`, 10001), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if fast := same(t, []byte(tc.data)); fast != tc.fast {
				t.Errorf("decoded here: %v, want %v", fast, tc.fast)
			}
		})
	}
}

// TestRealObjects decodes every object of the shared test data's bundles
// (YAML turned into JSON as the provisioner stores it) both ways.
func TestRealObjects(t *testing.T) {
	docs := realObjects(t, 400)
	for _, doc := range docs {
		if !same(t, doc) {
			t.Fatalf("not decoded here: %.200s", doc)
		}
	}
	t.Logf("%d objects", len(docs))
}

// TestIndependentResults checks that nothing decoded is shared between
// results a caller may change: maps and slices are new on every call (the
// strings shared are immutable).
func TestIndependentResults(t *testing.T) {
	doc := []byte(`{"a":{"b":["x","y"]},"type":"string"}`)
	first, err := Unmarshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	first["a"].(map[string]any)["b"].([]any)[0] = "changed"
	first["type"] = "changed"
	second, err := Unmarshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if got := second["a"].(map[string]any)["b"].([]any)[0]; got != "x" {
		t.Errorf("second decode sees the first's change: %v", got)
	}
	if second["type"] != "string" {
		t.Errorf("second decode sees the first's change: %v", second["type"])
	}
}

func TestConcurrent(t *testing.T) {
	docs := realObjects(t, 40)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range docs {
				doc := docs[(i+g)%len(docs)]
				got, err := Unmarshal(doc)
				if err != nil {
					t.Error(err)
					return
				}
				var want map[string]any
				if err := utiljson.Unmarshal(doc, &want); err != nil {
					t.Error(err)
					return
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("object %d differs", i)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestBoundedTables feeds unique keys and values to one decoder: its
// tables never grow past their bounds and decoding stays right.
func TestBoundedTables(t *testing.T) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range 3 * maxKeys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":"v%d"`, i, i)
	}
	b.WriteByte('}')
	var want map[string]any
	if err := utiljson.Unmarshal(b.Bytes(), &want); err != nil {
		t.Fatal(err)
	}
	d := getDecoder()
	d.data, d.pos = b.Bytes(), 0
	got, ok := d.top()
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded: %v; differs from util/json's: %v", ok, !reflect.DeepEqual(got, want))
	}
	if len(d.keys) == 0 || len(d.keys) > maxKeys || len(d.values) == 0 || len(d.values) > maxValues {
		t.Errorf("tables hold %d keys and %d values, bounds %d and %d", len(d.keys), len(d.values), maxKeys, maxValues)
	}
	d.release()
}

func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `{"a":[1,2.5,-3e2,"x",true,false,null,{"b":{}}]}`,
		`{"metadata":{"name":"n","managedFields":[{"f:x":{}}]},"status":{}}`,
		`{"s":"\ud83d\ude00\u00e9\n\\"}`, "{\"k\":\"\xff\"}", `{"a":1,"a":2}`,
		`{"n":9223372036854775808}`, `{"n":-0}`, `{"n":1e400}`, `[`, `{"a":01}`,
		`{"openAPIV3Schema":{"x":{"a":"b","b":"a"},"y":{"a":"b","a":"b"},"z":[{"a":"b"},{"a":"b"}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		same(t, data)
	})
}

func BenchmarkUnmarshal(b *testing.B) {
	docs := realObjects(b, 0)
	var size int64
	for _, d := range docs {
		size += int64(len(d))
	}
	b.Run("jsonmap", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			for _, d := range docs {
				if _, err := Unmarshal(d); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("utiljson", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			for _, d := range docs {
				var m map[string]any
				if err := utiljson.Unmarshal(d, &m); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// realObjects is up to n (0: all) objects of the shared test data's
// registry+v1 bundles, as compact JSON.
func realObjects(t testing.TB, n int) [][]byte {
	t.Helper()
	root := testenv.SharedTestdata("fleet")
	paths, _ := filepath.Glob(filepath.Join(root, "*", "manifests", "*.yaml"))
	if len(paths) == 0 {
		t.Fatalf("no fleet test data under %s", root)
	}
	var docs [][]byte
	for _, p := range paths {
		text, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for part := range strings.SplitSeq(string(text), "\n---") {
			doc, err := yaml.YAMLToJSON([]byte(part))
			if err != nil || string(doc) == "null" {
				continue
			}
			docs = append(docs, doc)
			if n > 0 && len(docs) == n {
				return docs
			}
		}
	}
	return docs
}

// sameJSON checks that Marshal, Encode, Size and Write answer v exactly
// as encoding/json does.
func sameJSON(t testing.TB, v any) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	got, err := Marshal(v)
	if (err != nil) != (wantErr != nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("%#v: error %v, encoding/json's %v", v, err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%#v:\n got %s\nwant %s", v, got, want)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	wantErr = enc.Encode(v)
	got, err = Encode(v)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%#v: error %v, encoding/json's %v", v, err, wantErr)
	}
	if err != nil {
		return
	}
	want = buf.Bytes()
	if !bytes.Equal(got, want) {
		t.Fatalf("%#v: without HTML escapes:\n got %s\nwant %s", v, got, want)
	}
	if n := Size(v); n != len(want)-1 {
		t.Fatalf("%#v: Size %d, JSON of %d bytes", v, n, len(want)-1)
	}
	prefix := []byte("---\n")
	if got, err := Append(prefix, v); err != nil || !bytes.Equal(got, append(prefix[:len(prefix):len(prefix)], want[:len(want)-1]...)) {
		t.Fatalf("%#v: Append gave %s (%v), want %s after the prefix", v, got, err, want)
	}
}

func TestMarshal(t *testing.T) {
	for name, v := range map[string]any{
		"nil":           nil,
		"nil map":       map[string]any(nil),
		"nil slice":     []any(nil),
		"empty":         map[string]any{"m": map[string]any{}, "s": []any{}, "str": ""},
		"sorted keys":   map[string]any{"b": int64(1), "a": int64(2), "B": int64(3), "aa": int64(4), "": int64(5), "é": int64(6)},
		"nested":        map[string]any{"a": []any{map[string]any{"z": []any{nil, true, false}, "y": "x"}, []any{[]any{}}}},
		"ints":          []any{int64(0), int64(-1), int64(math.MaxInt64), int64(math.MinInt64), 7},
		"floats":        []any{0.0, math.Copysign(0, -1), 1.5, 2.0, 1e20, 1e21, 1e-6, 1e-7, 123456789.123, 5e-324, math.MaxFloat64, -1e-9, 1e100},
		"not finite":    map[string]any{"a": math.Inf(1)},
		"nan":           []any{math.NaN()},
		"escapes":       "quote\" backslash\\ \b\f\n\r\t \x00\x01\x1f \x7f <html> & é 中 😀",
		"separators":    "a\u2028b\u2029c",
		"not utf-8":     "a\xffb\xc3\xe2\x82",
		"key escapes":   map[string]any{"<k>\n\xff": "v"},
		"typed values":  map[string]any{"labels": map[string]string{"a": "<b>"}, "list": []string{"x"}, "n": int32(3), "f": float32(0.1)},
		"typed deep":    []any{map[string]any{"ok": "<", "typed": []int{1, 2}}},
		"json number":   map[string]any{"n": json.Number("12")},
		"unsupported":   map[string]any{"c": make(chan int)},
		"raw message":   map[string]any{"r": json.RawMessage(`{"b":1,"a":2}`)},
		"long string":   strings.Repeat("x<", 1000),
		"float32 alone": float32(1e-7),
	} {
		t.Run(name, func(t *testing.T) { sameJSON(t, v) })
	}
}

// TestMarshalRealObjects writes the fleet's objects both ways.
func TestMarshalRealObjects(t *testing.T) {
	for _, doc := range realObjects(t, 0) {
		m, err := Unmarshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, m)
	}
}

func FuzzMarshal(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,2.5,-3e2,"x<y>&z",true,false,null,{"b":{}}]}`,
		`{"s":"\u2028\u2029\ud83d\ude00\b\f\u0000","k":1e-7,"l":1e21,"m":-0.0}`,
		"{\"k\":\"\xff\"}", `{"n":9223372036854775808,"z":0.000001}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Unmarshal(data)
		if err != nil {
			return
		}
		sameJSON(t, m)
	})
}

func BenchmarkMarshal(b *testing.B) {
	var objs []map[string]any
	var size int64
	for _, doc := range realObjects(b, 0) {
		m, err := Unmarshal(doc)
		if err != nil {
			b.Fatal(err)
		}
		objs = append(objs, m)
		size += int64(len(doc))
	}
	b.Run("jsonmap", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			for _, o := range objs {
				if _, err := Marshal(o); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			for _, o := range objs {
				if _, err := json.Marshal(o); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// TestMarshalDeepAndCyclic: nesting deeper than this encoder writes is
// left to encoding/json, which writes deep values and refuses cycles.
func TestMarshalDeepAndCyclic(t *testing.T) {
	var deep any = "leaf"
	for i := range 3 * maxEncodeDepth {
		if i%2 == 0 {
			deep = map[string]any{"a": deep}
		} else {
			deep = []any{deep}
		}
	}
	sameJSON(t, deep)

	cyclic := map[string]any{}
	cyclic["self"] = []any{cyclic}
	if _, err := Marshal(cyclic); err == nil {
		t.Error("Marshal of a cycle: no error")
	}
	if b, err := Encode(cyclic); err == nil || b != nil {
		t.Errorf("Encode of a cycle: %q, %v", b, err)
	}
	if _, err := Append(nil, cyclic); err == nil {
		t.Error("Append of a cycle: no error")
	}
}

func TestNesting(t *testing.T) {
	deep := func(n int) any {
		var v any = "x"
		for i := range n {
			if i%2 == 0 {
				v = []any{v}
			} else {
				v = map[string]any{"k": v}
			}
		}
		return v
	}
	for _, tc := range []struct {
		v           any
		limit, want int
	}{
		{"x", 4, 0},
		{map[string]any{}, 4, 1},
		{deep(3), 4, 3},
		{deep(4), 4, 4},
		{deep(5), 4, 5},
		{deep(50), 4, 5}, // looked for no deeper than past the limit
		{map[string]any{"a": "x", "b": deep(6)}, 8, 7},
	} {
		if got := Nesting(tc.v, tc.limit); got != tc.want {
			t.Errorf("Nesting(%v, %d) = %d, want %d", tc.v, tc.limit, got, tc.want)
		}
	}
}

func TestOwned(t *testing.T) {
	labels := map[string]any{"a": "b"}
	list := []any{"x", "y", "z"}
	decoded := func() map[string]any {
		m, err := Unmarshal([]byte(`{"metadata":{"labels":{"a":"b"}},"spec":{"items":[1,{"x":[]},[2,3.5,true,null]]}}`))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	deep := map[string]any{}
	for range 10 {
		deep = map[string]any{"d": deep}
	}
	for _, tc := range []struct {
		name   string
		values []any
		want   bool
	}{
		{"nothing", nil, true},
		{"scalars", []any{"a", int64(1), 1.5, nil, true}, true},
		{"decoded apart", []any{decoded(), decoded()}, true},
		{"a map in two objects", []any{map[string]any{"labels": labels}, map[string]any{"labels": labels}}, false},
		{"a map twice in one object", []any{map[string]any{"a": labels, "b": []any{labels}}}, false},
		{"the same object twice", []any{labels, labels}, false},
		{"a slice in two objects", []any{map[string]any{"l": list}, map[string]any{"l": list}}, false},
		{"overlapping slices", []any{map[string]any{"l": list[:2]}, map[string]any{"l": list[1:]}}, false},
		{"a slice's spare capacity used by another", []any{map[string]any{"l": list[:1]}, map[string]any{"l": list[2:]}}, false},
		{"empty parts", []any{map[string]any{"a": []any{}, "b": map[string]any{}}, map[string]any{"a": []any{}}}, true},
		{"a nil map", []any{map[string]any{"b": map[string]any(nil)}}, false},
		{"a nil slice", []any{map[string]any{"c": []any(nil)}}, false},
		{"a string that is not UTF-8", []any{map[string]any{"n": "a\xc3"}}, false},
		{"a key that is not UTF-8", []any{map[string]any{"a\xc3": "n"}}, false},
		{"an int", []any{map[string]any{"n": 1}}, false},
		{"a typed slice", []any{map[string]any{"n": []string{"a"}}}, false},
		{"nested within the limit", []any{deep}, true},
		{"a map twice under the shared key", []any{map[string]any{"spec": map[string]any{SharedKey: map[string]any{"a": labels, "b": []any{labels}}}}}, true},
		{"a slice twice under the shared key", []any{map[string]any{SharedKey: map[string]any{"a": list, "b": list}}}, true},
		{"under the shared key in two objects", []any{map[string]any{SharedKey: labels}, map[string]any{SharedKey: labels}}, true},
		{"a map under the shared key and outside it", []any{map[string]any{"x": labels, "s": map[string]any{SharedKey: labels}}}, false},
		{"outside, then under the shared key", []any{map[string]any{"x": labels}, map[string]any{SharedKey: map[string]any{"y": labels}}}, false},
		{"overlapping slices under the shared key", []any{map[string]any{SharedKey: map[string]any{"a": list[:2], "b": list[1:]}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			heap, ok := Owned(maxDepth, 1000, tc.values...)
			if ok != tc.want {
				t.Errorf("Owned = %v, want %v", ok, tc.want)
			}
			if ok && len(tc.values) > 0 && tc.name != "scalars" && heap <= 0 {
				t.Errorf("no heap estimated for %v", tc.values)
			}
		})
	}
	if _, ok := Owned(5, 1000, deep); ok {
		t.Error("Owned looked past its depth limit")
	}
	if _, ok := Owned(maxDepth, 5, decoded()); ok {
		t.Error("Owned looked past its parts limit")
	}
	cycle := map[string]any{}
	cycle["self"] = cycle
	if _, ok := Owned(maxDepth, 1000, cycle); ok {
		t.Error("Owned of a cycle")
	}
	// A map reached twice at each of 40 levels: 2^40 paths, refused within
	// the parts limit rather than walked.
	shared := map[string]any{}
	for range 40 {
		shared = map[string]any{"a": shared, "b": shared}
	}
	if _, ok := Owned(maxDepth, 100000, shared); ok {
		t.Error("Owned of a shared map")
	}
	// Under the shared key too, a cycle is refused, and a part met again
	// is held to the depth left where it is met: a chain of five, met at
	// depth one and again at depth eight, nests 14 deep.
	loop := map[string]any{}
	loop["self"] = loop
	if _, ok := Owned(maxDepth, 1000, map[string]any{SharedKey: loop}); ok {
		t.Error("Owned of a cycle under the shared key")
	}
	chain := map[string]any{"v": "x"}
	for range 4 {
		chain = map[string]any{"c": chain}
	}
	deeper := any(chain)
	for range 8 {
		deeper = map[string]any{"d": deeper}
	}
	twice := map[string]any{SharedKey: map[string]any{"a": chain, "b": deeper}}
	if _, ok := Owned(10, 1000, twice); ok {
		t.Errorf("Owned(10) of a value nested %d deep under the shared key", Nesting(twice, 100))
	}
	if _, ok := Owned(Nesting(twice, 100), 1000, twice); !ok {
		t.Error("Owned refused a part met again within the depth left")
	}
	// Under the shared key the same map is one part, walked once: 41
	// maps, not 2^40 paths.
	if heap, ok := Owned(maxDepth, 100, map[string]any{SharedKey: shared}); !ok || heap > 42*(mapHeader+mapGroup+2) {
		t.Errorf("Owned of a map shared 2^40 ways under the shared key: %v, %d bytes", ok, heap)
	}
	// The estimate follows the values' real heap: a list of small maps
	// takes far more than four times its JSON.
	small := make([]any, 10000)
	for i := range small {
		small[i] = map[string]any{"a": int64(1)}
	}
	heap, ok := Owned(maxDepth, 1<<20, small)
	if !ok || heap < 40*int64(len(`{"a":1},`)*len(small)) {
		t.Errorf("10,000 maps of one number estimated at %d bytes (%v), want over forty times their JSON", heap, ok)
	}
}
