package yamlcost

import (
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	yamlv2 "go.yaml.in/yaml/v2"
	yamlv3 "go.yaml.in/yaml/v3"
)

// FuzzScanCost holds the estimates to what the decoders make of a
// document: the node bound is never below the parse tree's nodes (aliases
// not expanded) nor below the values yaml.v2 decodes unless aliases were
// reported, and no alias the parse holds is missed. (The depth estimate is
// an early refusal only: a decoded document is held to the depth limit
// exactly.)
func FuzzScanCost(f *testing.F) {
	for _, s := range []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  k: v\n",
		"a: &a [x, x]\nb: {\"k\":*a, \"l\":*a}\n",
		"a: &a [x]\rb:\r  *a\r",
		"a: &a [x]\nb:\u2028  *a\n",
		"a: !!seq &a [x]\nb: [*a, *a]\n",
		"- ? &k a\n  : *k\n",
		"description: \"one\n  *two\"\n",
		"k: |\n  *text\n  &more\n",
		"[a, {b: c}, [d, e]]",
		"--- &a\n- *a\n",
		"a: &a [x]\nb: # |\n  [*a, *a]\n",
		"a: &a [x]\nb: [\"]\":*a]\n",
		"x: \"[\"\nk:\n  k:\n    k: v\n",
		"a: &a [x]\nb: [*a]\n...\n]: \n",
		utf16LE("a: &a [x]\nb: [*a, *a]\n"),
	} {
		f.Add(s)
	}
	// Real manifests, as seeds.
	matches, _ := filepath.Glob("../../provisioner/registry/testdata/*/*/manifests/*.yaml")
	for _, p := range matches[:min(len(matches), 20)] {
		if b, err := os.ReadFile(p); err == nil && len(b) < 8192 {
			f.Add(string(b))
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 8192 {
			return
		}
		if !utf8.Valid([]byte(text)) {
			// The scan reads UTF-8 only; Check refuses the rest.
			if _, err := Check([]byte(text), 1<<30, 1<<30); err == nil {
				t.Errorf("Check accepted text that is not UTF-8: %q", text)
			}
			return
		}
		nodes, aliases := syntaxNodes([]byte(text)), mayAlias([]byte(text))
		var doc yamlv3.Node
		if err := yamlv3.Unmarshal([]byte(text), &doc); err == nil {
			real, _, realAliases := tree(&doc, 0)
			if realAliases && !aliases {
				t.Errorf("an alias the scan did not see in %q", text)
			}
			if nodes < real {
				t.Errorf("estimated %d nodes, the parse has %d: %q", nodes, real, text)
			}
		}
		// What Check accepts, yaml.v2 decodes within its bound, aliases
		// expanded.
		const limit = 1000
		if _, err := Check([]byte(text), limit, 64); err != nil {
			return
		}
		var v any
		if err := yamlv2.Unmarshal([]byte(text), &v); err == nil {
			if n := values(v, 0); n > limit || !aliases && n > nodes {
				t.Errorf("yaml.v2 decoded %d values where Check accepted %d nodes at most (scan: %d, aliases %v): %q", n, limit, nodes, aliases, text)
			}
		}
	})
}

// tree counts n's nodes (aliases not followed), how deeply its collections
// nest, and whether it holds an alias.
func tree(n *yamlv3.Node, level int) (nodes, depth int, aliases bool) {
	nodes = 1
	if n.Kind == yamlv3.AliasNode {
		aliases = true
	}
	if n.Kind == yamlv3.MappingNode || n.Kind == yamlv3.SequenceNode {
		level++
		depth = level
	}
	for _, c := range n.Content {
		cn, cd, ca := tree(c, level)
		nodes += cn
		depth = max(depth, cd)
		aliases = aliases || ca
	}
	return nodes, depth, aliases
}

// values counts what yaml.v2 decoded: each value, and each key, once.
// Past 1<<20 it stops.
func values(v any, n int) int {
	if n > 1<<20 {
		return n
	}
	n++
	switch v := v.(type) {
	case map[any]any:
		for k, e := range v {
			n = values(e, values(k, n))
		}
	case []any:
		for _, e := range v {
			n = values(e, n)
		}
	}
	return n
}
