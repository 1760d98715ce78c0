package statuspatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// diff agrees with evanphx/json-patch's CreateMergePatch (what it
// replaced) on random JSON objects as json.Marshal writes them (nested
// objects, nulls, lists, members added and removed, type changes).
func TestDiffMatchesCreateMergePatch(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	keys := []string{"a", "b", "c", "d", "<&>", "é"}
	var value func(depth int) any
	value = func(depth int) any {
		switch n := r.Intn(8); {
		case n == 0:
			return nil
		case n == 1:
			return r.Intn(3) == 0
		case n == 2:
			return r.Intn(4)
		case n == 3:
			return fmt.Sprint(r.Intn(3))
		case n == 4 && depth > 0:
			l := make([]any, r.Intn(3))
			for i := range l {
				l[i] = value(depth - 1)
			}
			return l
		default:
			if depth == 0 {
				return "x"
			}
			m := map[string]any{}
			for i := r.Intn(4); i > 0; i-- {
				m[keys[r.Intn(len(keys))]] = value(depth - 1)
			}
			return m
		}
	}
	mutate := func(v any) any {
		b, _ := json.Marshal(v)
		var c any
		_ = json.Unmarshal(b, &c)
		var walk func(any, int) any
		walk = func(v any, depth int) any {
			m, ok := v.(map[string]any)
			if !ok || r.Intn(4) == 0 {
				if r.Intn(2) == 0 {
					return value(depth)
				}
				return v
			}
			for k := range m {
				switch r.Intn(4) {
				case 0:
					delete(m, k)
				case 1:
					m[k] = walk(m[k], depth-1)
				}
			}
			if r.Intn(3) == 0 {
				m[keys[r.Intn(len(keys))]] = value(depth - 1)
			}
			return m
		}
		return walk(c, 3)
	}
	for i := 0; i < 20000; i++ {
		before := map[string]any{}
		for j := r.Intn(4); j > 0; j-- {
			before[keys[r.Intn(len(keys))]] = value(3)
		}
		after := mutate(before)
		if _, ok := after.(map[string]any); !ok {
			continue
		}
		ours, err := MergeFrom(before, after).Data(nil)
		if err != nil {
			t.Fatal(err)
		}
		from, _ := json.Marshal(map[string]any{"status": before})
		to, _ := json.Marshal(map[string]any{"status": after})
		theirs, err := jsonpatch.CreateMergePatch(from, to)
		if err != nil {
			t.Fatal(err)
		}
		var o, w any
		if err := json.Unmarshal(ours, &o); err != nil {
			t.Fatalf("%s: %v", ours, err)
		}
		_ = json.Unmarshal(theirs, &w)
		if !reflect.DeepEqual(o, w) {
			t.Fatalf("before %s\nafter  %s\nours   %s\ntheirs %s", from, to, ours, theirs)
		}
		// And it takes before to after (where a merge patch can).
		applied, err := jsonpatch.MergePatch(from, ours)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(to, []byte("null")) {
			var a, x any
			_ = json.Unmarshal(applied, &a)
			_ = json.Unmarshal(to, &x)
			if !reflect.DeepEqual(a, x) {
				t.Fatalf("applying %s to %s gave %s, want %s", ours, from, applied, to)
			}
		}
	}
}
