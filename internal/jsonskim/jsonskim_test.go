package jsonskim

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

var crdKeep = Members{"metadata": {"managedFields"}, "status": nil}

// want is what decoding text whole and keeping keep's members gives.
func want(t *testing.T, text string, keep Members) map[string]any {
	t.Helper()
	var whole map[string]any
	if err := json.Unmarshal([]byte(text), &whole); err != nil {
		t.Fatalf("test input %q: %v", text, err)
	}
	out := map[string]any{}
	for k, omit := range keep {
		v, ok := whole[k]
		if !ok {
			continue
		}
		if m, ok := v.(map[string]any); ok {
			for _, o := range omit {
				delete(m, o)
			}
		}
		out[k] = v
	}
	return out
}

func skim(t *testing.T, text string, keep Members) (map[string]any, string) {
	t.Helper()
	out, err := Object(nil, bufio.NewReaderSize(strings.NewReader(text), 16), keep, 100)
	if err != nil {
		t.Fatalf("Object(%q): %v", text, err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("Object(%q) = %q, not JSON: %v", text, out, err)
	}
	return got, string(out)
}

func TestObject(t *testing.T) {
	for _, tc := range []struct{ name, text string }{
		{"empty", `{}`},
		{"nothing wanted", `{"kind":"CustomResourceDefinition","spec":{"a":[1,2,{"b":"}"}]}}`},
		{"a CRD", `{"kind":"CustomResourceDefinition","apiVersion":"apiextensions.k8s.io/v1","metadata":{"name":"a.b","uid":"u","resourceVersion":"12","generation":3,"managedFields":[{"manager":"m","fieldsV1":{"f:spec":{}}}],"labels":{"x":"y"}},"spec":{"group":"b","versions":[{"name":"v1","schema":{"openAPIV3Schema":{"type":"object","description":"quotes \" and \\ and } ] , {"}}}]},"status":{"conditions":[{"type":"Established","status":"True"}],"acceptedNames":{"kind":"A"}}}`},
		{"whitespace everywhere", " { \"status\" : { \"conditions\" : [ { \"type\" : \"Established\" , \"status\" : \"True\" } , 1 , -2.5e3 , true , false , null ] } , \"spec\" : [ ] , \"metadata\" : { } } "},
		{"managedFields first and last", `{"metadata":{"managedFields":[],"a":"b","managedFields2":1,"c":{"managedFields":1}},"status":{}}`},
		{"only managedFields", `{"metadata":{"managedFields":[{"x":"y"}]}}`},
		{"escaped names", `{"st\u0061tus":{"a":1},"status":{"b":"\u00e9\n"}}`},
		{"scalars kept", `{"status":"s","metadata":12}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, out := skim(t, tc.text, crdKeep)
			w := want(t, tc.text, crdKeep)
			// A duplicate name is decoded as its last: both sides agree
			// once decoded.
			if !reflect.DeepEqual(got, w) {
				t.Errorf("Object = %s\ndecoded %v\nwant %v", out, got, w)
			}
		})
	}
}

func TestObjectRefuses(t *testing.T) {
	for _, tc := range []struct{ name, text string }{
		{"not an object", `[1]`},
		{"cut in a string", `{"status":"ab`},
		{"cut in an object", `{"status":{"a":1`},
		{"cut in an array", `{"spec":[1,2`},
		{"no colon", `{"status" 1}`},
		{"a bare word for a name", `{status:1}`},
		{"elements without commas", `{"spec":[1 2]}`},
		{"too deep", `{"spec":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`},
		{"empty", ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Object(nil, bufio.NewReader(strings.NewReader(tc.text)), crdKeep, 100)
			if err == nil {
				t.Fatalf("Object(%q) succeeded", tc.text)
			}
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("Object(%q): %v, want a syntax error or an unexpected end", tc.text, err)
			}
		})
	}
}

// TestObjectReadsNoFurther: the reader is left just past the object.
func TestObjectReadsNoFurther(t *testing.T) {
	r := bufio.NewReader(strings.NewReader(`{"status":{"a":[1,2]},"spec":1} rest`))
	if _, err := Object(nil, r, crdKeep, 100); err != nil {
		t.Fatal(err)
	}
	if rest, _ := io.ReadAll(r); string(rest) != " rest" {
		t.Errorf("left %q unread, want %q", rest, " rest")
	}
}

// TestObjectGenerated compares skimming with decoding whole on generated
// objects.
func TestObjectGenerated(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var gen func(depth int) any
	gen = func(depth int) any {
		switch n := rng.IntN(8); {
		case depth > 4 || n < 2:
			return []any{"s", "a \" b", `\`, "}]{[,:", "é", "\u2028"}[rng.IntN(6)]
		case n < 3:
			return []any{1.5, -3.0, 1e21, true, false, nil}[rng.IntN(6)]
		case n < 5:
			a := make([]any, rng.IntN(4))
			for i := range a {
				a[i] = gen(depth + 1)
			}
			return a
		default:
			m := map[string]any{}
			for range rng.IntN(5) {
				m[[]string{"managedFields", "status", "metadata", "spec", "x", "a\"b"}[rng.IntN(6)]] = gen(depth + 1)
			}
			return m
		}
	}
	for i := range 2000 {
		top := map[string]any{}
		for _, k := range []string{"kind", "metadata", "spec", "status"} {
			if rng.IntN(4) > 0 {
				top[k] = gen(1)
			}
		}
		text, err := json.MarshalIndent(top, "", []string{"", " ", "\t"}[i%3])
		if err != nil {
			t.Fatal(err)
		}
		got, out := skim(t, string(text), crdKeep)
		if w := want(t, string(text), crdKeep); !reflect.DeepEqual(got, w) {
			t.Fatalf("object %d: %s\nskimmed to %s\ndecoded %v\nwant %v", i, text, out, got, w)
		}
	}
}
