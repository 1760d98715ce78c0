package jsonmap

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	yamlv2 "go.yaml.in/yaml/v2"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// sameYAML checks that FromYAML answers text exactly as the long way
// (YAMLToJSON, then util/json) does, and says whether it converted it
// itself and whether text is a valid document.
func sameYAML(t testing.TB, text []byte) (direct, valid bool) {
	t.Helper()
	var want map[string]any
	raw, wantErr := yaml.YAMLToJSON(text)
	if wantErr == nil {
		wantErr = utiljson.Unmarshal(raw, &want)
	} else {
		wantErr = &yamlError{wantErr}
	}
	got, err := FromYAML(text)
	if (err != nil) != (wantErr != nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("%q: error %v, the long way's %v", text, err, wantErr)
	}
	if wantErr != nil {
		return false, false
	}
	if !reflect.DeepEqual(got, want) || (got == nil) != (want == nil) {
		t.Fatalf("%q:\n got %#v\nwant %#v", text, got, want)
	}
	return converted(text), true
}

// converted says whether FromYAML converts text without the long way.
func converted(text []byte) bool {
	var doc any
	if yamlv2.Unmarshal(text, &doc) != nil {
		return false
	}
	switch m := doc.(type) {
	case nil:
		return true
	case map[any]any:
		_, ok := fromYAMLMap(m, 0)
		return ok
	}
	return false
}

func TestFromYAML(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		direct     bool
	}{
		{"empty", "", true},
		{"comment only", "# nothing\n", true},
		{"null", "null", true},
		{"scalars", "s: x\ni: 42\nneg: -7\nt: true\nf: false\nn: null\ntilde: ~\nempty:\n", true},
		{"yaml 1.1", "a: yes\nb: off\nc: 0x1F\nd: 0o17\ne: 017\nf: 1_000\ng: +12", true},
		{"floats", "a: 1.5\nb: 2.0\nc: 1e3\nd: -0.0\ne: 1e21\nf: 1e20\ng: 0.000001\nh: 1e-7\ni: 123456789.0\nj: .5", true},
		{"big ints", "a: 9223372036854775807\nb: 9223372036854775808\nc: 18446744073709551615\nd: -9223372036854775809\ne: 99999999999999999999999", true},
		{"not finite", "a: .inf", false},
		{"nan", "a: .nan", false},
		{"nested", "a:\n  b:\n  - 1\n  - x: [1, {y: z}]\n  - []\n  - {}\n", true},
		{"int keys", "1: a\n-2: b\n0x10: c", true},
		{"bool keys", "true: a\nno: b", true},
		{"float key", "1.5: a", false},
		{"null key", "~: a", false},
		{"anchors", "a: &x {b: [1, 2]}\nc: *x\nd:\n  <<: *x\n  e: 3", true},
		{"quoted", "a: \"\\u00e9\\t\\x41\\U0001F600\"\nb: 'it''s'\nc: |\n  line\n  two\nd: >\n  folded\n  text\n", true},
		{"binary", "a: !!binary aGVsbG8=", true},
		{"binary not utf-8", "a: !!binary /w==", true},
		{"timestamp string", "a: 2001-12-14t21:59:43.10-05:00", true},
		{"timestamp tagged", "a: !!timestamp 2001-12-14", true},
		{"strings like numbers", "a: '1'\nb: \"2.0\"\nc: 1.0.0", true},
		{"top-level list", "- a\n- b", false},
		{"top-level scalar", "5", false},
		{"syntax error", "a: [1, 2", false},
		{"tab indent", "a:\n\tb: 1", false},
		{"duplicate keys", "a: 1\na: 2", true},
		{"set", "!!set {a, b}", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if direct, _ := sameYAML(t, []byte(tc.text)); direct != tc.direct {
				t.Errorf("converted directly: %v, want %v", direct, tc.direct)
			}
		})
	}
}

// TestFromYAMLRealDocuments converts every YAML document of the shared
// test data (bundles, charts' values, catalogs, the fleet) both ways.
func TestFromYAMLRealDocuments(t *testing.T) {
	root := testenv.SharedTestdata()
	docs, valid, direct, block := 0, 0, 0, 0
	var bytesValid, bytesBlock int
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") && !strings.HasSuffix(path, ".yml") {
			return err
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for part := range strings.SplitSeq(string(text), "\n---") {
			docs++
			d, ok := sameYAML(t, []byte(part))
			if ok {
				valid++
				bytesValid += len(part)
				if _, ok := fromBlock([]byte(part)); ok {
					block++
					bytesBlock += len(part)
				} else if testing.Verbose() {
					t.Logf("not block: %s", path)
				}
			}
			if d {
				direct++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every valid one (the rest are Helm templates) is converted directly.
	if valid < 800 || direct != valid {
		t.Errorf("%d documents, %d valid, %d converted directly", docs, valid, direct)
	}
	// Nearly all of them (all but those with anchors, flow sequences or
	// more-indented folded text) are read by the block decoder.
	if bytesBlock < bytesValid*9/10 {
		t.Errorf("the block decoder read %d of %d bytes", bytesBlock, bytesValid)
	}
	t.Logf("%d documents, %d valid, %d converted directly, %d (%d of %d bytes) by the block decoder", docs, valid, direct, block, bytesBlock, bytesValid)
}

// blockCases are documents in the block style, and whether the block
// decoder reads them (the rest go to yaml.v2).
var blockCases = []struct {
	name, text string
	block      bool
}{
	{"empty", "", true},
	{"comments", "# a\n\n  # b\n", true},
	{"explicit start", "---\na: 1\n", true},
	{"scalars", "s: x\ni: 42\nneg: -7\nplus: +3\nt: true\nnl: null\ntilde: ~\nempty:\nlast: 1", true},
	{"yaml 1.1 words", "a: yes\nb: Off\nc: y\nd: NO\ne: on\n", true},
	{"numbers", "a: 0x1F\nb: 0o17\nc: 0755\nd: 1_000\ne: 0b101\nf: -0b11\ng: 1.5\nh: 2.0\ni: 1e3\nj: .5\nk: 99999999999999999999\nl: 18446744073709551615\n", true},
	{"not finite", "a: .inf\n", false},
	{"number-like strings", "a: 0.1.0\nb: 1.2.3-rc.1\nc: 10Gi\nd: 1e\ne: +\nf: -\\x\ng: 0x\nh: 08\n", true},
	{"timestamps", "a: 2001-12-14\nb: 2001-12-14t21:59:43.10-05:00\nc: 2001-12-14 21:59:43.10\nd: 2001-13-14\n", true},
	{"comments after values", "a: x # c\nb: 'y' # c\nc: \"z\"   # c\nd: x#y\ne: [] # c\n", true},
	{"nested", "a:\n  b:\n    c: d\n  e: f\ng: h\n", true},
	{"sequences", "a:\n- x\n- y\nb:\n  - 1\n  -\n  - # c\n  - z\nc: d\n", true},
	{"compact mappings", "a:\n- name: x\n  value: y\n- name: z\n  nested:\n    k: v\n  list:\n  - 1\n", true},
	{"nested sequences", "a:\n- - 1\n  - 2\n- - - 3\n", true},
	{"entry on its own line", "a:\n-\n  b: c\n  d: e\n-\n  - f\n", true},
	{"empty flow collections", "a: []\nb: {}\nc:\n- []\n- {}\n", true},
	{"quoted keys", "\"a b\": 1\n'c''d': 2\n\"e\\tf\": 3\n\"\": 4\n", true},
	{"spaces before colon", "a   : 1\n", true},
	{"repeated keys", "a: 1\nb: 2\na: 3\n", true},
	{"plain folded", "a: one\n  two\n\n  three\n\n\n   four\nb: x\n", true},
	{"plain on its own line", "a:\n  one\n  two\nb:\n- x\n  y\n", true},
	{"plain continued with indicators", "a: x\n  - y\n  [z] {w} `v` 'u' \"t\" *s &r !q |p >o %n @m\n", true},
	{"plain ended by a comment", "a: x\n  # c\nb: y\n", true},
	{"plain continued after a comment", "a: x\n  # c\n  y\n", false},
	{"plain with a comment, continued", "a: x # c\n  y\n", false},
	{"single quoted", "a: 'it''s'\nb: 'one\n  two\n\n  three  '\nc: ''\n", true},
	{"double quoted", "a: \"\\u00e9\\x41\\U0001F600\\n\\t\\\"\\\\\\0\\a\\b\\v\\f\\r\\e\\ \\N\\_\\L\\P\"\nb: \"one\n  two  \n\n\n  three\"\nc: \"x\\\n  y\"\nd: \"x \\\n\n  y\"\n", true},
	{"quoted bad escape", "a: \"\\q\"\n", false},
	{"quoted surrogate", "a: \"\\ud800\"\n", false},
	{"literal", "a: |\n  one\n    two\n\n  three  \n\n\nb: |-\n  x\n\n  y\n\nc: |\n\n  lead\n", true},
	{"folded", "a: >\n  one\n  two\n\n  three\n\n\n  four\nb: >-\n  x\n  y\nc: >\n\n  lead\n", true},
	{"block scalar in a sequence", "a:\n- |\n  x\n- >-\n  y\n  z\n", true},
	{"block scalar with a comment line", "a: |\n  x\n  # not a comment\n# a comment\nb: y\n", true},
	{"folded more indented", "a: >\n  one\n    two\n  three\n\n    four\n\n  five\n  six\nb: >-\n  first\n    more\n", true},
	{"keep chomping", "a: |+\n  x\n\n", false},
	{"indentation indicator", "a: |2\n   x\n", false},
	{"literal spaces past indentation", "a: |\n  x\n     \n  y\n", false},
	{"non-ascii", "a: café ✓ 😀\n", true},
	{"anchors", "a: &x 1\nb: *x\n", false},
	{"tags", "a: !!str 1\n", false},
	{"flow content", "a: [1, 2]\n", false},
	{"tab", "a:\tb\n", false},
	{"carriage return", "a: b\r\n", false},
	{"bool key", "yes: a\n", false},
	{"null key", "~: a\n", false},
	{"int key", "1: a\n", false},
	{"merge key", "<<: {a: b}\n", false},
	{"top-level sequence", "- a\n", false},
	{"indented top level", "  a: b\n", false},
	{"entry after a value", "a: b\n- c\n", false},
	{"entry as a value", "a: - b\n", false},
	{"mapping in a value", "a: b: c\n", false},
	{"value ending in a colon", "a: b:\n", false},
	{"bad indentation", "a:\n  b: 1\n c: 2\n", false},
	{"more indented key", "a: 1\n  b: 2\n", false},
	{"document end", "a: 1\n...\n", false},
	{"second document", "a: 1\n---\nb: 2\n", false},
	{"directive", "%YAML 1.1\n---\na: 1\n", false},
	{"unterminated quote", "a: 'x\n", false},
	{"long key", strings.Repeat("k", 1001) + ": v\n", false},
}

func TestBlockDecoder(t *testing.T) {
	for _, tc := range blockCases {
		t.Run(tc.name, func(t *testing.T) {
			sameYAML(t, []byte(tc.text))
			if _, ok := fromBlock([]byte(tc.text)); ok != tc.block {
				t.Errorf("read by the block decoder: %v, want %v", ok, tc.block)
			}
		})
	}
}

// TestFromYAMLCollidingKeys: keys that are one in JSON (1 and "1") are
// left to the long way, whose choice between their values depends on map
// order.
func TestFromYAMLCollidingKeys(t *testing.T) {
	text := []byte("1: a\n'1': b")
	if converted(text) {
		t.Error("converted directly")
	}
	got, err := FromYAML(text)
	if err != nil || len(got) != 1 || got["1"] != "a" && got["1"] != "b" {
		t.Errorf("got %v, %v", got, err)
	}
}

func FuzzFromYAML(f *testing.F) {
	for _, s := range []string{
		"a: 1\nb: [x, 2.5, {c: null}]", "1: a\n'1': b", "a: 1e21\nb: 2.0", "a: &x [1]\nb: *x",
		"a: !!binary /w==", "- 1", "a: \"\\xff\"", "? [a]\n: b",
		"openAPIV3Schema:\n  x:\n    a: b\n    b: a\n  y:\n    a: b\n    a: b\n",
	} {
		f.Add([]byte(s))
	}
	for _, tc := range blockCases {
		f.Add([]byte(tc.text))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		if len(text) > 4096 {
			return // the YAML parser's own costs are not under test
		}
		// Colliding keys make the long way's answer random.
		var doc any
		if yamlv2.Unmarshal(text, &doc) == nil && collides(doc) {
			return
		}
		sameYAML(t, text)
	})
}

func BenchmarkFromYAML(b *testing.B) {
	root := testenv.SharedTestdata("fleet")
	paths, _ := filepath.Glob(filepath.Join(root, "*", "manifests", "*.yaml"))
	var docs [][]byte
	var size int64
	for _, p := range paths {
		text, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		docs = append(docs, text)
		size += int64(len(text))
	}
	b.Run("FromYAML", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			for _, d := range docs {
				if _, err := FromYAML(d); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("YAMLToJSON+Unmarshal", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			for _, d := range docs {
				raw, err := yaml.YAMLToJSON(d)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Unmarshal(raw); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// collides says whether m, or a map in it, has keys that are one in JSON.
func collides(v any) bool {
	switch v := v.(type) {
	case map[any]any:
		seen := map[string]bool{}
		for k, el := range v {
			key := fmt.Sprint(k)
			if seen[key] || collides(el) {
				return true
			}
			seen[key] = true
		}
	case []any:
		for _, el := range v {
			if collides(el) {
				return true
			}
		}
	}
	return false
}
