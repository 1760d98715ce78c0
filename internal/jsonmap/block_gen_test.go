package jsonmap

// The block decoder against the long way: edge cases, generated
// block-style documents (some mutated), and the time it takes on hostile
// shapes (BenchmarkBlockShapes).

import (
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

var blockEdgeCases = []string{
	// quoted "<<" is a plain string key, not a merge
	"'<<': x\n", "\"<<\": x\n",
	// keys resolving to timestamps stay strings
	"2001-12-14: x\n", "2001-12-14 10:00:00: x\n", "2001-12-14t10:00:00Z: x\n",
	"-: 1\n", ".: 1\n", "+: 1\n", "0x: 1\n", "_1: 1\n",
	// continuation columns under indentless and compact collections
	"a:\n- a\n b\n", "a:\n  b\n c\n", "a: x\n - y\n", "k:\n- - x\n    y\n", "k:\n- a: x\n   y\n",
	// quoted folding corner cases
	"a: '\n  '\n", "a: \"\n  \"\n", "a: \" \\\n  \"\n", "a: \"a\\\n  \\\n  b\"\n", "a: \"x\n\n  y\"\n",
	"a: 'x  \n  y'\n", "a: \"x\\\n\n  y\"\n", "a: \"x\\\n  \"\n", "a: 'x\n  # y'\n", "a: 'x\n  - y: z'\n",
	// block scalars
	"a: |\n  x\n\n", "a: |-\n  x\n\nb: 1\n", "a:\n- |\n x\n", "a: |\n  x\n #c\nb: 1\n", "a: |\n  x\n  \nb: 1\n",
	"a:\n  b: |\n      x\n    \n      y\n",
	// comments and plain text with indicators
	"a: b\n#\n  # x\nc: d\n", "a:\n  b: 1\n  # x\n # y\n  c: 2\n", "a: x\n  b:#c\n", "a: b:#c\n",
	"a::  1\n", ":a: 1\n", "?a: 1\n", "a: -#c\n", "a:\n  -#c\n",
	// numbers
	"a: 1_0\nb: 0x_1\nc: +0x10\nd: -0x10\ne: 0b\nf: 1e1000\ng: 1__\nh: 0o\ni: 00\nj: 09\nk: 1.\nl: +.5\nm: ._\nn: 1:20\no: 190:20:30\n",
	"a: 0x8000000000000000\nb: -0x8000000000000000\nc: -0x8000000000000001\nd: 1_e3\ne: .1_0\n",
	"a: 0b1111111111111111111111111111111111111111111111111111111111111111\n",
	"a: -0b1000000000000000000000000000000000000000000000000000000000000000\n",
	// escapes
	"a:\n  b: 1\na:\n  c: 2\n", "a: \"\\uFFFE\\uffff\\x80\\U0010FFFF\"\n", "\"\\N\": 1\n", "\"a\\x20b\": 1\n",
}

func TestBlockEdgeCases(t *testing.T) {
	for _, text := range blockEdgeCases {
		sameYAML(t, []byte(text))
	}
}

// hostile shapes, each made n bytes long.
var blockShapes = map[string]func(n int) string{
	// one line of 190 compact nested sequences per entry: column() per level
	"compact nested sequences": func(n int) string {
		line := strings.Repeat("- ", 190) + "x\n"
		return "k:\n" + strings.Repeat(line, n/len(line))
	},
	// compact mapping per level: "- a: " chains are not allowed, so a
	// sequence of compact mappings whose last value nests again
	"deep ladder closed at once": func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			b.WriteString("k:\n")
			for d := 1; d < 199; d++ {
				b.WriteString(strings.Repeat(" ", d*4) + "k:\n")
			}
			b.WriteString(strings.Repeat(" ", 199*4) + "k: v\n")
			b.WriteString("z" + fmt.Sprint(b.Len()) + ": 1\n")
		}
		return b.String()
	},
	"many blank lines in plain": func(n int) string {
		return "a: x\n" + strings.Repeat("\n", n/2) + "  y\n"
	},
	"many blank lines before key": func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			b.WriteString("a" + fmt.Sprint(b.Len()) + ":\n  b:\n    c:\n" + strings.Repeat("\n", 1000))
		}
		return b.String()
	},
	"long plain line":      func(n int) string { return "a: " + strings.Repeat("x", n) + "\n" },
	"long key spaces":      func(n int) string { return "a" + strings.Repeat(" ", n) + ": 1\n" },
	"long trailing spaces": func(n int) string { return "a: x" + strings.Repeat(" ", n) + "\n" },
	"unique keys": func(n int) string {
		var b strings.Builder
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "k%d: v%d\n", i, i)
		}
		return b.String()
	},
	"folded plain lines": func(n int) string {
		return "a: x\n" + strings.Repeat("  y y y y y y y\n", n/16)
	},
	"quoted lines": func(n int) string {
		return "a: \"x\n" + strings.Repeat("  y\\\n   \\ z\n", n/12) + "  \"\n"
	},
	"literal lines": func(n int) string {
		return "a: |\n" + strings.Repeat("  y y y y\n\n", n/11)
	},
	"numbers in sequence": func(n int) string {
		return "a:\n" + strings.Repeat("- 2001-12-14t21:59:43.10-05:00\n", n/32)
	},
	"blank-line-led literal": func(n int) string {
		return "a: |\n" + strings.Repeat("  \n", n/3) + "  x\n"
	},
	"long number-like plain": func(n int) string {
		return "a: 1" + strings.Repeat("_", n) + "\n"
	},
}

// BenchmarkBlockShapes times the block decoder on hostile shapes at 1 and
// 4 MiB: the time per byte stays flat (go test -bench BlockShapes).
func BenchmarkBlockShapes(b *testing.B) {
	for name, shape := range blockShapes {
		for _, n := range []int{1 << 20, 4 << 20} {
			text := []byte(shape(n))
			b.Run(fmt.Sprintf("%s/%dMiB", strings.ReplaceAll(name, " ", "-"), n>>20), func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				for b.Loop() {
					fromBlock(text)
				}
			})
		}
	}
}

// longWay is the reference answer.
func longWay(text []byte) (map[string]any, error) {
	var want map[string]any
	raw, err := yaml.YAMLToJSON(text)
	if err != nil {
		return nil, err
	}
	err = utiljson.Unmarshal(raw, &want)
	return want, err
}

// blockAgrees fails t if the block decoder reads text otherwise than the
// long way does.
func blockAgrees(t *testing.T, text string) {
	t.Helper()
	got, ok := fromBlock([]byte(text))
	if !ok {
		return
	}
	want, err := longWay([]byte(text))
	if err != nil {
		t.Errorf("MISMATCH %q: block ok %#v, long way error %v", text, got, err)
		return
	}
	if !reflect.DeepEqual(got, want) || (got == nil) != (want == nil) {
		t.Errorf("MISMATCH %q:\n block %#v\n long  %#v", text, got, want)
	}
}

type gen struct {
	r *rand.Rand
	b strings.Builder
}

var atoms = []string{"a", "b", "x", "y", " ", "  ", "#", " #", ":", ": ", "-", "- ", "'", "''", "\"", "\\", "\\n", "\\x41", "\\u00e9", "\\ ", "\\\"", "0", "1", "12", ".", "e", "E", "_", "?", "[", "]", "{", "}", ",", "é", "|", ">", "&", "*", "!", "%", "@", "`", "~", "+", "0x", "0o", "0b", "true", "no", "null", "2001-12-14", ".inf", "<<", "---", "...", "\t", "\r", "\u0085", "\u2028", "\ufeff", "😀"}

var benign = []string{"a", "b", "x", "y", " ", "  ", " #", ":", ":x", "-", "'", "''", "\"", "\\", "\\n", "\\x41", "\\u00e9", "\\ ", "0", "1", "12", ".", "e", "_", "é", "true", "no", "null", "~", "2001-12-14", "0x1f", "-1", "1.5", "#", "?", "[", "{", "|", ">"}

func (g *gen) word() string {
	n := 1 + g.r.IntN(4)
	var s strings.Builder
	for range n {
		if g.r.IntN(25) == 0 {
			s.WriteString(atoms[g.r.IntN(len(atoms))])
		} else {
			s.WriteString(benign[g.r.IntN(len(benign))])
		}
	}
	return s.String()
}

func (g *gen) sp(n int) string { return strings.Repeat(" ", max(n, 0)) }

func (g *gen) filler(col int) {
	for g.r.IntN(6) == 0 {
		switch g.r.IntN(4) {
		case 0:
			g.b.WriteString("\n")
		case 1:
			g.b.WriteString(g.sp(g.r.IntN(col+3)) + "\n")
		default:
			g.b.WriteString(g.sp(g.r.IntN(col+3)) + "#" + g.word() + "\n")
		}
	}
}

func (g *gen) key() string {
	switch g.r.IntN(6) {
	case 0:
		return "'" + strings.ReplaceAll(g.word(), "\n", "") + "'"
	case 1:
		return "\"" + strings.ReplaceAll(g.word(), "\n", "") + "\""
	case 2:
		return g.word()
	}
	return []string{"a", "b", "c", "name", "value", "1", "yes", "x y", "a:b", "-a", "?a"}[g.r.IntN(11)]
}

// scalar writes a scalar after "key: " or "- "; the collection is at col.
func (g *gen) scalar(col int) {
	switch g.r.IntN(7) {
	case 0, 1: // plain, maybe continued
		g.b.WriteString(g.word())
		for g.r.IntN(3) == 0 {
			g.b.WriteString("\n")
			if g.r.IntN(3) == 0 {
				g.b.WriteString(g.sp(g.r.IntN(3)) + "\n")
			}
			g.b.WriteString(g.sp(col + g.r.IntN(4) - 1))
			g.b.WriteString(g.word())
		}
	case 2, 3: // quoted
		q := "'\""[g.r.IntN(2)]
		g.b.WriteByte(q)
		g.b.WriteString(g.word())
		for g.r.IntN(3) == 0 {
			if g.r.IntN(2) == 0 {
				g.b.WriteString(g.sp(g.r.IntN(2)))
			}
			if g.r.IntN(4) == 0 {
				g.b.WriteString("\\")
			}
			g.b.WriteString("\n")
			if g.r.IntN(3) == 0 {
				g.b.WriteString(g.sp(g.r.IntN(3)) + "\n")
			}
			g.b.WriteString(g.sp(col + g.r.IntN(4) - 1))
			g.b.WriteString(g.word())
		}
		g.b.WriteByte(q)
		if g.r.IntN(4) == 0 {
			g.b.WriteString(" #c")
		}
	case 4, 5: // block scalar
		g.b.WriteString([]string{"|", "|-", ">", ">-", "|+", "|2", "| #c", "|#", ">\n"}[g.r.IntN(9)])
		ind := col + 1 + g.r.IntN(3)
		if g.r.IntN(8) == 0 {
			ind = col
		}
		n := 1 + g.r.IntN(4)
		for range n {
			g.b.WriteString("\n")
			switch g.r.IntN(5) {
			case 0:
				g.b.WriteString(g.sp(g.r.IntN(ind + 3)))
			case 1:
				g.b.WriteString(g.sp(ind + g.r.IntN(3)))
				g.b.WriteString(g.word())
			default:
				g.b.WriteString(g.sp(ind))
				g.b.WriteString(g.word())
			}
		}
	default:
		g.b.WriteString([]string{"[]", "{}", "[ ]", "[a]", "{}x", "[] #c"}[g.r.IntN(6)])
	}
}

func (g *gen) mapping(col, depth int, first bool) {
	n := 1 + g.r.IntN(3)
	for i := range n {
		if !first || i > 0 {
			g.filler(col)
			g.b.WriteString(g.sp(col))
		}
		g.b.WriteString(g.key())
		g.b.WriteString(g.sp(g.r.IntN(2)) + ":")
		g.value(col, depth)
		g.b.WriteString("\n")
	}
}

func (g *gen) value(col, depth int) {
	switch k := g.r.IntN(6); {
	case k == 0 || depth > 4:
		if g.r.IntN(2) == 0 {
			g.b.WriteString(" ")
			g.scalar(col)
		}
	case k == 1:
		g.b.WriteString(" ")
		g.scalar(col)
	case k == 2:
		g.b.WriteString("\n")
		c := col + 1 + g.r.IntN(3)
		g.b.WriteString(g.sp(c))
		g.mapping(c, depth+1, true)
		g.trim()
	case k == 3:
		g.b.WriteString("\n")
		c := col + g.r.IntN(3)
		g.b.WriteString(g.sp(c))
		g.sequence(c, depth+1)
		g.trim()
	case k == 4:
		g.b.WriteString("\n")
		c := col + 1 + g.r.IntN(3)
		g.b.WriteString(g.sp(c))
		g.scalar(col)
	default:
		g.b.WriteString(" #c")
	}
}

func (g *gen) trim() {
	s := strings.TrimSuffix(g.b.String(), "\n")
	g.b.Reset()
	g.b.WriteString(s)
}

func (g *gen) sequence(col, depth int) {
	n := 1 + g.r.IntN(3)
	for i := range n {
		if i > 0 {
			g.filler(col)
			g.b.WriteString(g.sp(col))
		}
		g.b.WriteString("-")
		switch k := g.r.IntN(6); {
		case k == 0 || depth > 4:
			if g.r.IntN(2) == 0 {
				g.b.WriteString(" ")
				g.scalar(col)
			}
		case k == 1:
			g.b.WriteString(" ")
			g.scalar(col)
		case k == 2:
			s := 1 + g.r.IntN(2)
			g.b.WriteString(g.sp(s))
			g.mapping(col+1+s, depth+1, true)
			g.trim()
		case k == 3:
			s := 1 + g.r.IntN(2)
			g.b.WriteString(g.sp(s))
			g.sequence(col+1+s, depth+1)
			g.trim()
		case k == 4:
			g.b.WriteString("\n")
			c := col + 1 + g.r.IntN(3)
			g.b.WriteString(g.sp(c))
			if g.r.IntN(2) == 0 {
				g.mapping(c, depth+1, true)
				g.trim()
			} else {
				g.scalar(col)
			}
		default:
			g.b.WriteString(" #c")
		}
		g.b.WriteString("\n")
	}
}

func (g *gen) doc() string {
	g.b.Reset()
	if g.r.IntN(5) == 0 {
		g.b.WriteString("---\n")
	}
	g.filler(0)
	g.mapping(0, 0, false)
	s := g.b.String()
	if g.r.IntN(4) == 0 {
		s = strings.TrimSuffix(s, "\n")
	}
	// mutations
	for g.r.IntN(4) == 0 {
		if len(s) == 0 {
			break
		}
		i := g.r.IntN(len(s))
		switch g.r.IntN(4) {
		case 0:
			s = s[:i] + s[i+1:]
		case 1:
			s = s[:i] + " " + s[i:]
		case 2:
			s = s[:i] + atoms[g.r.IntN(len(atoms))] + s[i:]
		case 3:
			s = s[:i] + "\n" + s[i:]
		}
	}
	return s
}

// TestBlockRandomDiff compares the block decoder with the long way on
// generated block-style documents, some mutated: 100,000 from a fixed seed,
// or as many as RUKPAK_BLOCK_GEN (a duration) from RUKPAK_BLOCK_GEN_SEED.
func TestBlockRandomDiff(t *testing.T) {
	seed, _ := strconv.ParseUint(os.Getenv("RUKPAK_BLOCK_GEN_SEED"), 10, 64)
	more := func(n int) bool { return n < 100000 }
	if v := os.Getenv("RUKPAK_BLOCK_GEN"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("RUKPAK_BLOCK_GEN=%q: %v", v, err)
		}
		deadline := time.Now().Add(d)
		more = func(int) bool { return time.Now().Before(deadline) }
	}
	g := &gen{r: rand.New(rand.NewPCG(seed, 1))}
	n, accepted := 0, 0
	for ; more(n) && !t.Failed(); n++ {
		s := g.doc()
		if _, ok := fromBlock([]byte(s)); ok {
			accepted++
		}
		blockAgrees(t, s)
	}
	t.Logf("%d documents, %d read by the block decoder", n, accepted)
	if accepted < n/20 {
		t.Errorf("the block decoder read %d of %d documents: the generator no longer reaches it", accepted, n)
	}
}
