package yamlcost

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	yamlv2 "go.yaml.in/yaml/v2"
	yamlv3 "go.yaml.in/yaml/v3"
)

func TestCheck(t *testing.T) {
	laughs := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for i, prev := 0, "a"; i < 8; i++ {
		name := string(rune('b' + i))
		laughs += name + ": &" + name + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n"
		prev = name
	}
	for _, tc := range []struct {
		name, text string
		want       string // error words; "" accepts
	}{
		{"a manifest", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  k: v\n", ""},
		{"JSON", `{"a": [1, 2, {"b": "c"}]}`, ""},
		{"deep block nesting", nested(40), "is nested more than 32 levels deep"},
		{"deep flow nesting", strings.Repeat("[", 40) + strings.Repeat("]", 40), "is nested more than 32 levels deep"},
		{"many nodes", strings.Repeat("- x\n", 2000), "has more than 1000 YAML nodes"},
		{"billion laughs", laughs, "expands to more than 1000 YAML nodes through aliases"},
		// The same, each alias where the line-based scan does not see a
		// node start: after a quoted key's ":" in flow context, and after
		// line breaks other than "\n".
		{"laughs after quoted keys", bomb(func(prev string, k int) string { return fmt.Sprintf(`"k%d":*%s`, k, prev) }, "{", "}", "\n"),
			"expands to more than 1000 YAML nodes through aliases"},
		{"laughs after carriage returns", bomb(func(prev string, _ int) string { return "\r  *" + prev }, "[", "]", "\r"),
			"expands to more than 1000 YAML nodes through aliases"},
		{"laughs after line separators", bomb(func(prev string, _ int) string { return "\u2028  *" + prev }, "[", "]", "\n"),
			"expands to more than 1000 YAML nodes through aliases"},
		{"laughs with tagged anchors", strings.ReplaceAll(laughs, ": &", ": !!seq &"), "expands to more than 1000 YAML nodes through aliases"},
		// An outside review's: a comment ending in " |" taken for a block
		// scalar header hid the lines under it; UTF-16, which the decoders
		// transcode; a quoted "]" closing a flow collection early, or a
		// quoted "[" leaving one open (so indentation went uncounted);
		// text after a "..." document end that yaml.v2 ignores and yaml.v3
		// refuses, so the expansion could not be counted.
		{"laughs under comments ending in a pipe", hiddenBomb(" # |", 4000), "has more than 1000 YAML nodes"},
		{"nesting under a comment ending in a pipe", "a: # |\n  " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "\n", "is nested more than 32 levels deep"},
		{"UTF-16", utf16LE(hiddenBomb("", 4000)), "is not UTF-8 text"},
		{"laughs after quoted brackets", quotedBracketBomb(), "YAML nodes"},
		{"nesting after a quoted bracket", "x: \"[\"\n" + nested(40), "is nested more than 32 levels deep"},
		{"nesting between quoted brackets", strings.Repeat(strings.Repeat("[", 10)+`"`+strings.Repeat("]", 10)+`", `, 4) + "x" + strings.Repeat("]", 40),
			"is nested more than 32 levels deep"},
		{"laughs before junk after the document end", junkBomb(), "holds aliases whose expansion cannot be counted"},
		// A second review's: structure the scan took for text. P is
		// 113,836 values to yaml.v2 (1,500 plain ones and a billion laughs
		// on one line); each hides it differently.
		{"a multi-line quote holding ] and ending in a pipe", "[ \"] |\n  \", " + reviewPayload() + "\n  ]\n", "YAML nodes"},
		{"a line of a multi-line quote starting with #", "[ \"x\n#\", " + reviewPayload() + "]\n", "YAML nodes"},
		{"a multi-line quote closed at the start of a line", "[ \"a\n\", " + reviewPayload() + ", \"b\n\", x ]\n", "YAML nodes"},
		{"a quote after a tag, then a plain scalar ending in a pipe", "[ !!str \"]\", x |\n  , " + reviewPayload() + "\n  ]\n", "YAML nodes"},
		{"a ] in a comment", "[ a, # ]\n b |\n  , " + reviewPayload() + "\n  ]\n", "YAML nodes"},
		{"nesting past brackets in comments", strings.Repeat("[ # ]\n", 40) + "x\n" + strings.Repeat("]", 40) + "\n", "is nested more than 32 levels deep"},
		{"nesting past quoted brackets after ?", strings.Repeat("[?\"]\", ", 40) + strings.Repeat("]", 40) + "\n", "is nested more than 32 levels deep"},
		{"nesting past a multi-line quote ending in a pipe", "[ \"] |\n  \", " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "\n  ]\n", "is nested more than 32 levels deep"},
		{"nesting through aliases", aliasNesting(), "is nested more than 32 levels deep through aliases"},
		{"nesting past brackets in multi-line quotes", strings.Repeat("[[[[[ \"x\n]]]]]\n\", ", 10) + "x" + strings.Repeat("]", 50) + "\n", "is nested more than 32 levels deep"},
		// A third review's: a block scalar in a compact nested collection
		// ends at that collection's column, not the line's; a quote after
		// a tag or an anchor starts at a node start; a ] in a comment that
		// a quote follows closes nothing; a quote that is no quote leaves
		// the indentation counted.
		{"values after a block scalar in a nested sequence", "- - |\n  - " + flowList(2000) + "\n", "has more than 1000 YAML nodes"},
		{"values after a block scalar in a mapping in a sequence", "- k: |\n  j: " + flowList(2000) + "\n", "has more than 1000 YAML nodes"},
		{"nesting after a block scalar in a nested sequence", "- - |\n  - " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "\n", "is nested more than 32 levels deep"},
		{"a quote after an anchor", "[ &q \"]\", b\n  - |\n    , " + flowList(2000) + "\n]\n", "has more than 1000 YAML nodes"},
		{"nesting past a quote after a tag", strings.Repeat("[", 30) + " !!str \"" + strings.Repeat("]", 30) + "\", " + strings.Repeat("[", 30) + "x" + strings.Repeat("]", 60), "is nested more than 32 levels deep"},
		{"a ] in a comment a quote follows", "[ a, # ]\"\n  b\n  - |\n    , " + flowList(2000) + "\n]\n", "has more than 1000 YAML nodes"},
		{"nesting after a quote that is none", "x: a, \"\n" + indented(40), "is nested more than 32 levels deep"},
		// A fourth review's: a "#" at a token start ("[a,#]") starts a
		// comment too; "x:\"" in block context is text, so the scan and the
		// decoders may disagree about a quote: once a quote runs past its
		// line, no block scalar is skipped and no ] closes what an earlier
		// line opened.
		{"values after a # at a token start", "[a,#] - |\n        " + strings.Repeat("x,", 2000) + "]\n", "has more than 1000 YAML nodes"},
		{"nesting after a # at a token start", "[a,#] - |\n        " + strings.Repeat("[", 40) + strings.Repeat("]", 41) + "\n", "is nested more than 32 levels deep"},
		{"values after quotes the scan and the decoders pair differently", "r:\n a: x:\"y\n b: \"z\nk: |\n w\"\n c: " + flowList(2000) + "\n", "has more than 1000 YAML nodes"},
		// A fifth review's: a quote after "a:" in flow context, or after
		// a tag (which may hold quotes), may be no quote to the decoders.
		// Linear time: a megabyte line of comments a quote follows (each
		// "#" asked whether a quote follows it took the square of that).
		{"a line of comments a quote follows", "k: v" + strings.Repeat(" #", 1<<19) + "\"\n", ""},
		{"values after a quote after a plain key's colon", "[ a:'x, ']\nk: |\n  ', " + flowList(2000) + "\n", "has more than 1000 YAML nodes"},
		{"nesting after a quote after a tag holding a quote", "[ !a' \"x\", ']\nk: |\n  ', " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "]\n", "is nested more than 32 levels deep"},
		{"values after a quote after a tag holding a colon", "[ !a:'x, ']\nk: |\n  ', " + flowList(2000) + "\n", "has more than 1000 YAML nodes"},
		// A sixth review's: a tag holding "]" (to the decoders a tag's
		// characters are a URI's), a byte order mark past the start (the
		// decoders then drop lines' first characters, "#" too), a mapping
		// in each flow sequence ("[k: [k: ...]]") and block entries
		// holding mappings ("- k:" lines) nesting twice per bracket or
		// line.
		{"values after a tag holding a bracket", sixthReview["tag bracket"], "has more than 1000 YAML nodes"},
		{"nesting after a tag holding a bracket", sixthReview["tag bracket nesting"], "is nested more than 32 levels deep"},
		{"values after a byte order mark", sixthReview["byte order mark"], "byte order mark"},
		{"laughs after a byte order mark", sixthReview["byte order mark laughs"], "byte order mark"},
		{"a byte order mark at the start", "\ufeffapiVersion: v1\nkind: ConfigMap\n", ""},
		{"mappings in flow sequences", sixthReview["flow pairs"], "is nested more than 32 levels deep"},
		{"mappings in flow sequences over lines", sixthReview["flow pairs over lines"], "is nested more than 32 levels deep"},
		{"mappings in block entries", sixthReview["block entries"], "is nested more than 32 levels deep"},
		{"mappings in block entries after a bracket in text", sixthReview["block entries after a bracket in text"], "is nested more than 32 levels deep"},
		// A seventh review's: nodes the line-based scan then counted
		// missed, behind a tag it ended at "[", ":" or "?", quotes it
		// paired otherwise than the decoders, and a tag in plain text.
		// The node bound counts every character of syntax now: none can
		// be hidden.
		{"values after a tag holding a colon and a bracket", seventhReview["tag colon"], "has more than 1000 YAML nodes"},
		{"values after a tag holding brackets", seventhReview["tag brackets"], "has more than 1000 YAML nodes"},
		{"values after quotes paired otherwise", seventhReview["quotes paired otherwise"], "has more than 1000 YAML nodes"},
		{"values after quotes paired otherwise in flow", seventhReview["quotes paired otherwise in flow"], "has more than 1000 YAML nodes"},
		{"values after a tag in plain text", seventhReview["tag in plain text"], "has more than 1000 YAML nodes"},
		{"nesting after a tag holding a question mark", seventhReview["tag question mark"], "is nested more than 32 levels deep"},
		{"nesting after quotes the scan and the decoders pair differently", "[[[[[[[[a,#, \"\n\"]]]]]]]]\nx\", " + strings.Repeat("[", 31) + "b" + strings.Repeat("]", 39) + "\n", "is nested more than 32 levels deep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check([]byte(tc.text), 1000, 32)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// bomb is a billion laughs whose every alias is written by alias (the
// previous level's anchor name and the alias's position), its sequences
// or mappings opened and closed by open and close, its lines ended by eol.
func bomb(alias func(prev string, k int) string, open, close, eol string) string {
	text := "a: &a [x, x, x, x, x, x, x, x, x, x]" + eol
	for i, prev := 0, "a"; i < 8; i++ {
		name := string(rune('b' + i))
		items := make([]string, 10)
		for k := range items {
			items[k] = alias(prev, k)
		}
		text += name + ": &" + name + " " + open + strings.Join(items, ",") + close + eol
		prev = name
	}
	return text
}

// hiddenBomb is a billion laughs of block mappings with flow values (four
// levels, and plain values so yaml.v2's own aliasing bound lets it
// through; fewer than 1,000 plain values keep it under the node limit
// alone), each value after comment on the line of its key.
func hiddenBomb(comment string, plain int) string {
	s := "p:" + comment + "\n  [" + strings.Repeat("x,", plain) + "x]\n"
	s += "a: &a" + comment + "\n  [" + strings.Repeat("x,", 9) + "x]\n"
	prev := "a"
	for _, name := range []string{"b", "c", "d", "e"} {
		s += name + ": &" + name + comment + "\n  [" + strings.Repeat("*"+prev+",", 9) + "*" + prev + "]\n"
		prev = name
	}
	return s + "f:" + comment + "\n  [*e,*e]\n"
}

// junkBomb is a billion laughs of 35,000 values, then a document end
// marker and text yaml.v3 refuses and yaml.v2 never reads.
func junkBomb() string {
	s := "p: [" + strings.Repeat("x,", 420) + "x]\na: &a [x,x,x,x,x,x,x,x,x,x]\n"
	prev := "a"
	for _, name := range []string{"b", "c", "d"} {
		s += name + ": &" + name + " [" + strings.Repeat("*"+prev+",", 9) + "*" + prev + "]\n"
		prev = name
	}
	return s + "e: [*d, *d]\n...\n]: \n"
}

// flowList is a flow sequence of n plain values.
func flowList(n int) string { return "[" + strings.TrimSuffix(strings.Repeat("x,", n), ",") + "]" }

// indented is n mappings, each nested in the one before, indented by one
// space more each.
func indented(n int) string {
	var sb strings.Builder
	for i := range n {
		sb.WriteString(strings.Repeat(" ", i) + "k:\n")
	}
	return sb.String()
}

// reviewPayload is 1,500 plain values and a billion laughs, on one line.
func reviewPayload() string {
	rep := func(s string, n int) string { return strings.TrimSuffix(strings.Repeat(s+",", n), ",") }
	return rep("p", 1500) + ", &a [" + rep("x", 100) + "], &b [" + rep("*a", 10) + "], &c [" + rep("*b", 10) + "], &d [" + rep("*c", 10) + "]"
}

// aliasNesting nests ten levels of ten sequences through aliases: 561
// values, 101 levels deep.
func aliasNesting() string {
	s := "- &a0 " + strings.Repeat("[", 10) + "x" + strings.Repeat("]", 10) + "\n"
	for i := 1; i < 10; i++ {
		s += fmt.Sprintf("- &a%d %s*a%d%s\n", i, strings.Repeat("[", 10), i-1, strings.Repeat("]", 10))
	}
	return s
}

// quotedBracketBomb is a billion laughs whose aliases follow quoted keys
// holding "]".
func quotedBracketBomb() string {
	s := "p: [" + strings.Repeat("x,", 380) + "x]\na: &a [x,x,x,x,x,x,x,x,x,x]\n"
	prev := "a"
	for _, name := range []string{"b", "c", "d"} {
		s += name + ": &" + name + " [" + strings.Repeat(`"]":*`+prev+",", 9) + `"]":*` + prev + "]\n"
		prev = name
	}
	return s + `e: ["]":*d, "]":*d]` + "\n"
}

// utf16LE is s in UTF-16LE with a byte order mark.
func utf16LE(s string) string {
	u := utf16.Encode([]rune("\ufeff" + s))
	b := make([]byte, 0, 2*len(u))
	for _, c := range u {
		b = append(b, byte(c), byte(c>>8))
	}
	return string(b)
}

// Text that looks like aliases, without an anchor for any of them: real
// CRDs' descriptions, continued on lines that start with "*" inside a
// quoted string. No exact count is needed (it costs a parse of the
// document): the decoders refuse an alias of no anchor.
func TestNoAnchorNoAliases(t *testing.T) {
	for _, text := range []string{
		"description: \"Refers to the resource by its\n\n  *AWSResourceReference\\ntype to provide syntax\"\n",
		"- *.example.com\n- R & D\n",
	} {
		if mayAlias([]byte(text)) {
			t.Errorf("%q: aliases reported without an anchor", text)
		}
	}
	// Both decoders refuse such an alias indeed.
	for name, unmarshal := range map[string]func([]byte, any) error{"yaml.v2": yamlv2.Unmarshal, "yaml.v3": yamlv3.Unmarshal} {
		var v any
		if err := unmarshal([]byte("a: [*b, *b]\n"), &v); err == nil {
			t.Errorf("%s decoded an alias of no anchor: %v", name, v)
		}
	}
}

// The review's bombs are real: yaml.v2 decodes each to tens or hundreds
// of thousands of values.
func TestReviewBombsExpand(t *testing.T) {
	for name, text := range map[string]string{
		"comment pipe":                 hiddenBomb(" # |", 4000),
		"UTF-16":                       utf16LE(hiddenBomb("", 4000)),
		"quoted bracket":               quotedBracketBomb(),
		"junk after end":               junkBomb(),
		"quote and pipe":               "[ \"] |\n  \", " + reviewPayload() + "\n  ]\n",
		"quote closed at a line start": "[ \"a\n\", " + reviewPayload() + ", \"b\n\", x ]\n",
	} {
		var v any
		if err := yamlv2.Unmarshal([]byte(text), &v); err != nil {
			t.Errorf("%s: yaml.v2 refused it: %v", name, err)
			continue
		}
		if n := values(v, 0); n < 30_000 {
			t.Errorf("%s: yaml.v2 decoded %d values, want a bomb", name, n)
		}
	}
}

// sixthReview are the inputs of a sixth outside review, each of which
// yaml.v2 decodes to more than 1,000 values or 32 levels (TestCheck's
// limits) while the scan then estimated less.
var sixthReview = func() map[string]string {
	rep := func(s string, n int) string { return strings.TrimSuffix(strings.Repeat(s+",", n), ",") }
	deep := strings.Repeat("[", 40) + "x" + strings.Repeat("]", 40)
	visible := "p: [" + rep("x", 60) + "]\na: &a [" + rep("x", 10) + "]\nb: &b [" + rep("*a", 10) + "]\n"
	var entries strings.Builder
	for i := range 25 {
		entries.WriteString(strings.Repeat("  ", i) + "- k:\n")
	}
	return map[string]string{
		"tag bracket":            "[ !a] x\n  - |\n    , " + flowList(2000) + "\n  ]\n",
		"tag bracket nesting":    "[ !a] x\n  - |\n    , " + deep + "\n  ]\n",
		"byte order mark":        "p: " + strings.Repeat("a", 503) + "\n\ufeffk:\n#  " + flowList(2000) + "\n",
		"byte order mark laughs": visible + "m:\n  s:" + strings.Repeat(" ", 314) + "\ufeffv\n  z:\n#  [" + rep("*b", 30) + "]\n  t: x\n",
		"flow pairs":             strings.Repeat(`["a":`, 20) + "x" + strings.Repeat("]", 20),
		"flow pairs over lines":  strings.Repeat("[ a:\n", 20) + "x" + strings.Repeat("]", 20),
		"block entries":          entries.String(),
		// The same after a bracket the scan counts open and the decoders
		// read as text.
		"block entries after a bracket in text": "x: a[b\ny:\n" + entries.String(),
	}
}()

// seventhReview are a seventh outside review's inputs, as sixthReview's.
var seventhReview = map[string]string{
	"tag colon":                       "[ !a:] x\n  - |\n    , " + flowList(2000) + "\n  ]\n",
	"tag brackets":                    "[ !a[]] x\n  - |\n    , " + flowList(2000) + "\n  ]\n",
	"tag question mark":               "[ !a?] x\n  - |\n    , " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "\n  ]\n",
	"quotes paired otherwise":         "- a - \"x: \"y\nk: |\n  \"\n  j: " + flowList(2000) + "\n",
	"quotes paired otherwise in flow": "[ a - \"x, \"y ]\nk: |\n  \", " + flowList(2000) + "\n  ]\n",
	"tag in plain text":               "[ a - !t," + strings.TrimPrefix(flowList(2000), "[") + "\n",
}

// The sixth and seventh reviews' inputs are what they said they are.
func TestReviewInputsAreBombs(t *testing.T) {
	inputs := maps.Clone(sixthReview)
	maps.Copy(inputs, seventhReview)
	for name, text := range inputs {
		var v any
		if err := yamlv2.Unmarshal([]byte(text), &v); err != nil {
			t.Errorf("%s: yaml.v2 refused it: %v", name, err)
			continue
		}
		if n, d := values(v, 0), depthOf(v); n <= 1000 && d <= 32 {
			t.Errorf("%s: yaml.v2 decoded %d values %d levels deep, within the limits", name, n, d)
		}
	}
}

// depthOf is how many collections the deepest of v's values is in.
func depthOf(v any) int {
	d := 0
	switch v := v.(type) {
	case map[any]any:
		for k, e := range v {
			d = max(d, depthOf(k), depthOf(e))
		}
	case []any:
		for _, e := range v {
			d = max(d, depthOf(e))
		}
	default:
		return 0
	}
	return d + 1
}

// Every bomb of TestCheck is one the decoders accept: refusing it is the
// check's work, not theirs.
func TestBombsAreYAML(t *testing.T) {
	for _, text := range []string{
		bomb(func(prev string, k int) string { return fmt.Sprintf(`"k%d":*%s`, k, prev) }, "{", "}", "\n"),
		bomb(func(prev string, _ int) string { return "\r  *" + prev }, "[", "]", "\r"),
		bomb(func(prev string, _ int) string { return "\u2028  *" + prev }, "[", "]", "\n"),
	} {
		// Three levels deep, not nine: small enough to decode.
		small := strings.Join(strings.SplitAfterN(text, "d: ", 2)[:1], "")
		small = strings.TrimSuffix(small, "d: ")
		var v map[string]any
		if err := yamlv2.Unmarshal([]byte(small), &v); err != nil || len(v) != 3 {
			t.Errorf("%q: decoded %d keys, %v; want a, b and c", small, len(v), err)
		}
	}
}

func nested(n int) string {
	var sb strings.Builder
	for i := range n {
		sb.WriteString(strings.Repeat("  ", i) + "k:\n")
	}
	return sb.String()
}

func TestCheckJSON(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       string // error words; "" accepts
	}{
		{"an object", `{"a":[1,2,{"b":"c"}]}`, ""},
		// Check reads each ": " and "- " of a one-line document as a
		// level; inside strings they are text.
		{"strings that look like YAML", `{"description":"` + strings.Repeat("a: b - c, [d] {e} ", 100) + `"}`, ""},
		{"escaped quotes", `{"a":"\\\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\"}`, ""},
		{"deep nesting", strings.Repeat("[", 33) + strings.Repeat("]", 33), "is nested more than 32 levels deep"},
		{"deep objects", strings.Repeat(`{"a":`, 33) + "1" + strings.Repeat("}", 33), "is nested more than 32 levels deep"},
		{"many values", "[" + strings.Repeat("1,", 1000) + "1]", "has more than 1000 YAML nodes"},
		{"many keys", "{" + strings.Repeat(`"k":1,`, 500) + `"k":1}`, "has more than 1000 YAML nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CheckJSON([]byte(tc.text), 1000, 32)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// An exact count waits for the counting budget: with all of it taken (by
// other documents' counts), a document with aliases is not parsed until
// some is given back. Documents without aliases need none.
func TestExactCountsShareABudget(t *testing.T) {
	if err := counting.Acquire(context.Background(), countBudget); err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			counting.Release(countBudget)
		}
	}()
	if _, err := Check([]byte("a: [x, y]\nb: [x, y]\n"), 1000, 32); err != nil {
		t.Fatalf("a document without aliases: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Check([]byte("a: &a [x, y]\nb: *a\n"), 1000, 32)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("counted with the budget taken (%v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	counting.Release(countBudget)
	released = true
	if err := <-done; err != nil {
		t.Fatalf("refused: %v", err)
	}
}

// The scan allocates next to nothing however its lines read: a line of
// "- " once grew a slice by an entry per "- " (64 MB for 2.8 MB).
func TestCheckAllocatesLittle(t *testing.T) {
	for name, text := range map[string][]byte{
		"a line of entries": []byte(strings.Repeat("- ", 1<<20) + "x\n"),
		"a line of keys":    []byte(strings.Repeat("? ", 1<<20) + "x\n"),
		"a line of words":   []byte("k: " + strings.Repeat("a ", 1<<20) + "\n"),
		"lines of brackets": []byte(strings.Repeat("[\n", 1<<20)),
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _ = Check(text, 1<<30, 256)
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
			t.Errorf("%s: Check of %d bytes allocated %d bytes", name, len(text), n)
		}
	}
}
