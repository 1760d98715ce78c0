// Package yamlcost bounds what decoding YAML may cost before a decoder
// runs: a count of its characters of syntax bounds a document's nodes
// from above, a scan that allocates next to nothing estimates its nesting,
// and a document with aliases has its expansion counted exactly. Bundles,
// charts and catalogs are hostile input, and the YAML libraries that
// decode them bound neither.
package yamlcost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	yamlv3 "go.yaml.in/yaml/v3"
	"golang.org/x/sync/semaphore"
)

// Check bounds what decoding one YAML (or JSON) document's text costs
// and refuses it when it holds more than maxNodes nodes, aliases
// expanded, or nests deeper than maxDepth, before any decoder allocates.
// The node bound is sound: no text decodes to more. The nesting of text
// without aliases is an estimate (scanDepth), which a caller that must
// hold decoded values to maxDepth exactly checks on them. It returns the
// node bound (aliases expanded). Error messages continue a subject
// ("document 3 ", "values.yaml ").
func Check(text []byte, maxNodes, maxDepth int) (int, error) {
	// The decoders read UTF-16 too (by its byte order mark), whose bytes the
	// scan cannot read; invalid UTF-8 they refuse anyway.
	if !utf8.Valid(text) {
		return 0, errors.New("is not UTF-8 text")
	}
	// A byte order mark is read at the start only. One further on, go-yaml
	// looks for at its read buffer's start, not where it reads: after a
	// refill that starts at one, each line's first character is dropped
	// ("#" too, which uncomments the line), differently by yaml.v2 and
	// yaml.v3, as the buffers fall.
	text = bytes.TrimPrefix(text, bom)
	if bytes.Contains(text, bom) {
		return 0, errors.New("holds a byte order mark (U+FEFF) past its start")
	}
	nodes := syntaxNodes(text)
	if nodes > maxNodes {
		return 0, fmt.Errorf("has more than %d YAML nodes", maxNodes)
	}
	depth, aliases := scanDepth(text, maxDepth), mayAlias(text)
	switch {
	case depth > maxDepth:
		return 0, fmt.Errorf("is nested more than %d levels deep", maxDepth)
	case !aliases:
		return nodes, nil
	}
	// Aliases repeat the node they name, so a few kilobytes can stand for
	// billions of nodes. Count them exactly: the text's own nodes are
	// bounded by now, and so is its parse tree. (yaml.v2 never decodes
	// more than yaml.v3's expansion holds: two outside reviews' fuzzing
	// compared them.)
	expanded, deep, err := countExpanded(text, nodes, maxNodes, maxDepth)
	if err != nil {
		// Not left to the decoder: yaml.v2 accepts some text yaml.v3
		// refuses (what follows a "..." document end marker), and bounds
		// aliasing only at hundreds of thousands of values.
		return 0, fmt.Errorf("holds aliases whose expansion cannot be counted: %w", err)
	}
	if expanded > maxNodes {
		return 0, fmt.Errorf("expands to more than %d YAML nodes through aliases", maxNodes)
	}
	if deep > maxDepth {
		return 0, fmt.Errorf("is nested more than %d levels deep through aliases", maxDepth)
	}
	return max(nodes, expanded), nil
}

// counting bounds the exact counts running at once in this process: a
// document's parse tree costs ~370 bytes per node it holds (a 120,000-node
// list: 44 MB), which no decoder's budget covers yet, so many documents
// with aliases (from one hostile author, say) would together hold
// hundreds of megabytes. Each takes its node bound, at most the whole
// budget: one larger runs alone.
var counting = semaphore.NewWeighted(countBudget)

// countBudget is ~24 MiB of parse trees at once.
const countBudget = 64 << 10

// countExpanded is expandedNodes within the counting budget, nodes the
// bound of text's own.
func countExpanded(text []byte, nodes, limit, maxDepth int) (int, int, error) {
	// A node's worth per 20 bytes for text of long scalars, whose tree
	// holds their text (as plain's decoding budget weighs them).
	w := int64(min(max(nodes, len(text)/20, 1), countBudget))
	if err := counting.Acquire(context.Background(), w); err != nil {
		return 0, 0, err
	}
	defer counting.Release(w)
	return expandedNodes(text, limit, maxDepth)
}

// bom is U+FEFF in UTF-8.
var bom = []byte("\ufeff")

// CheckJSON is Check for text a JSON decoder decodes (which has no
// aliases): it counts nesting and values outside strings, so a document of
// compact JSON on one line, whose strings hold ": " and "- " that Check's
// line-based estimate would count as nesting, is held to the same limits.
func CheckJSON(text []byte, maxNodes, maxDepth int) (int, error) {
	nodes, depth := 1, 0
	inString, escaped := false, false
	for _, c := range text {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > maxDepth {
				return 0, fmt.Errorf("is nested more than %d levels deep", maxDepth)
			}
			nodes++
		case '}', ']':
			depth = max(depth-1, 0)
		case ',', ':':
			// A value after each: the key's and the next element's.
			if nodes++; nodes > maxNodes {
				return 0, fmt.Errorf("has more than %d YAML nodes", maxNodes)
			}
		}
	}
	return nodes, nil
}

// syntaxNodes bounds the YAML nodes of a document, aliases not expanded,
// from above, whatever the text: every node but the document's root
// comes with a character of syntax ("[", "]", "{", "}", ",", ":", "-" or
// "?"), each of which brings at most two (a key and its value, a
// collection and its first entry), wherever it stands: in a comment, a
// quoted or block scalar, or text the decoders read as structure. Counted
// so, the 923 real documents of the test data estimate at 15–25% over
// what a line-based scan that skipped comments and scalars estimated, and
// no document can hide nodes from it. Line breaks count one more each.
func syntaxNodes(text []byte) int {
	nodes := 2 // the document and its root
	for i, c := range text {
		switch c {
		case '[', ']', '{', '}', ',', ':', '-', '?':
			nodes += 2
		case '\n', '\r':
			nodes++
		case 0x85: // NEL: C2 85
			if i > 0 && text[i-1] == 0xc2 {
				nodes++
			}
		case 0xa8, 0xa9: // LS, PS: E2 80 A8, E2 80 A9
			if i > 1 && text[i-1] == 0x80 && text[i-2] == 0xe2 {
				nodes++
			}
		}
	}
	return nodes
}

// scanDepth estimates, in one pass that allocates next to nothing, how
// deeply a document nests, stopping once past maxDepth. It is an
// estimate for an early and clear refusal: the decoders bound nesting
// themselves (10,000 levels), what a document costs is bounded by its
// nodes (syntaxNodes), and a decoded document is held to the depth limit
// exactly where its values are converted (plain's decoder).
//
// Lines end at every YAML line break (LF, CR, CRLF, NEL, LS, PS). The scan
// leaves out only what it is sure is no structure: blank lines, comment
// lines and comments after " #" (when no quote follows on the line, which
// could close a scalar begun on an earlier line), and the text of block
// scalars whose header follows an indicator on a line without quotes. A
// quoted scalar that starts at a node start, on one line or several, is
// counted as if it were structure, except that what it leaves open is
// carried on and what it closes is not: a "]" in a string never lowers
// the count. Depth counts two levels per open bracket ("[k: v]" is a
// sequence of a mapping) and per block entry ("- k:" lines indented by two
// nest twice per line). FuzzScanCost holds it to the decoders.
func scanDepth(text []byte, maxDepth int) (depth int) {
	flow := 0 // open [ and {
	// The block indentation levels open; its length is bounded by maxDepth,
	// as the scan stops past it.
	indents := make([]int, 0, 32)
	// blockScalar is the indentation of the line that started a block
	// scalar ("|" or ">"), whose more indented lines are text; -1 outside.
	blockScalar := -1
	// quote is the quote of a quoted scalar begun at a node start and not
	// closed on its line (0: none); its text so far is in open.
	var quote byte
	var open quoted
	// unsure: a quote was carried across a line; the decoders may see it
	// the other way round, so no block scalar text is skipped and no ] or }
	// lowers the count from then on.
	unsure := false
	for len(text) > 0 {
		var line []byte
		line, text = nextLine(text)
		start := 0
		if quote != 0 {
			// Inside a quoted scalar begun on an earlier line: counted as
			// structure, less what it closes, until its quote closes.
			end := closingQuote(line, -1, quote)
			// The quote may be no quote (a " in plain text or a comment):
			// the line's indentation and indicators still count as depth.
			ind := 0
			for ind < len(line) && line[ind] == ' ' {
				ind++
			}
			for flow == 0 && len(indents) > 0 && indents[len(indents)-1] >= ind {
				indents = indents[:len(indents)-1]
			}
			if ind < len(line) && (len(indents) == 0 || indents[len(indents)-1] < ind) {
				indents = append(indents, ind)
			}
			// Block entries open a level each, as on other lines.
			seg := line
			if end >= 0 {
				seg = line[:end]
			}
			for i, c := range seg {
				if (c == '-' || c == '?') && (i+1 == len(seg) || seg[i+1] == ' ' || seg[i+1] == '\t') {
					if indents = openEntry(indents, i); len(indents) > maxDepth {
						return len(indents)
					}
				}
			}
			if end < 0 {
				open.add(line)
				if d := len(indents) + 2*(flow+open.deepest) + indicatorsIn(line); d > depth {
					depth = d
				}
				if depth > maxDepth {
					return depth
				}
				continue
			}
			open.add(line[:end])
			if d := len(indents) + 2*(flow+open.deepest) + indicatorsIn(line[:end]); d > depth {
				depth = d
			}
			flow += open.open
			quote, open = 0, quoted{}
			start = end + 1
		}
		indent := 0
		for indent < len(line) && (line[indent] == ' ' || line[indent] == '\t') {
			indent++
		}
		if start > 0 {
			indent = start // the rest of a line that closed a quote
		} else if indent == len(line) || line[indent] == '#' && !hasQuote(line) {
			continue // blank or comment
		}
		if blockScalar >= 0 {
			if indent > blockScalar {
				continue // text, whatever it looks like ("*Warning*")
			}
			blockScalar = -1
		}
		switch {
		case start > 0:
			// The line continues a quoted scalar: its indentation is text.
		case flow == 0:
			// Block context: indentation opens and closes levels.
			for len(indents) > 0 && indents[len(indents)-1] >= indent {
				indents = indents[:len(indents)-1]
			}
			indents = append(indents, indent)
		case len(indents) == 0 || indents[len(indents)-1] < indent:
			// In flow context only opened.
			indents = append(indents, indent)
		}
		lineDepth := 0
		// afterIndicator: the bytes before i on this line, blanks aside,
		// end with an indicator (or there are none), so a node may start.
		afterIndicator := start == 0
		// maybeComment: past a " #" that a quote follows, so perhaps in a
		// comment: no ] lowers the count and no quote opens there.
		maybeComment := indent < len(line) && line[indent] == '#'
		noClose, lineFlow := false, flow
		// loose: the node start before i may be none to the decoders (after
		// a ":" or "?" without a blank and without a quoted key or a
		// bracket before it, as in [a:'x, or after a tag, whose characters
		// may be quotes): a quote there may be the decoders' opening one.
		loose := false
		// Where the line's last quote is: whether a quote follows a "#" is
		// asked once per line, not once per "#" (a line of " #" and a
		// quote at its end would take time in the square of its length).
		lastQuote := bytes.LastIndexAny(line, "\"'")
	scan:
		for i := indent; i < len(line); i++ {
			c := line[i]
			wasLoose := false
			if c != ' ' && c != '\t' {
				wasLoose, loose = loose, false
			}
			// Whether a blank or the end of a line follows c.
			nextBlank := i+1 >= len(line) || line[i+1] == ' ' || line[i+1] == '\t'
			indicator := false
			switch c {
			case '[', '{':
				flow++
				indicator = true
			case ']', '}':
				if flow > 0 && !maybeComment && !noClose && (!unsure || flow > lineFlow) {
					flow--
				}
			case ',':
				indicator = true
			case ':', '-', '?':
				switch {
				case nextBlank:
					lineDepth++
					indicator = true
					if c != ':' {
						// Also where the scan counts a bracket open that
						// the decoders read as text ("x: a[b"), whose
						// block entries nest all the same.
						if indents = openEntry(indents, i); len(indents) > maxDepth {
							return len(indents) // a line of "- - - …": no longer a slice
						}
					}
				case c != '-':
					// In flow context the decoders take ":" and "?" as
					// indicators without a blank after them ({"k":*a},
					// [?"]"]); taken so whatever the count of brackets
					// open says.
					indicator = true
					loose = i == 0 || bytes.IndexByte([]byte("\"']}"), line[i-1]) < 0
				}
			case '#':
				if i > indent && line[i-1] != ' ' && line[i-1] != '\t' {
					noClose = true // a comment if at a token start ("[a,#]")
				}
				if i > indent && (line[i-1] == ' ' || line[i-1] == '\t') {
					if lastQuote < i {
						break scan // a comment
					}
					maybeComment = true
				}
			case '!', '&':
				if afterIndicator && !maybeComment {
					// A node's properties: a node still starts after them.
					// An anchor's name is letters, digits, "-" and "_" to
					// both decoders. A tag runs to a blank, brackets,
					// commas and quotes included ("[ !a] x" closes
					// nothing); the scan may take one in plain text for a
					// tag ("[ a - !t,x]"), so a bracket in it opens and
					// none closes.
					for i+1 < len(line) && line[i+1] != ' ' && line[i+1] != '\t' {
						if c == '&' && !isNameChar(line[i+1]) {
							break
						}
						i++
						if c == '!' && (line[i] == '[' || line[i] == '{') {
							flow++
						}
					}
					if d := len(indents) + lineDepth + 2*flow; d > depth {
						depth = d
					}
					loose = true
					continue
				}
			case '"', '\'':
				if afterIndicator && !maybeComment {
					// Counted, in case it is not a quoted scalar after
					// all; what it leaves open stays open after it.
					var q quoted
					end := closingQuote(line, i, c)
					if end < 0 {
						q.add(line[i+1:])
						if d := len(indents) + lineDepth + 2*(flow+q.deepest); d > depth {
							depth = d
						}
						quote, open = c, q
						unsure = true
						break scan
					}
					q.add(line[i+1 : end])
					if d := len(indents) + lineDepth + 2*(flow+q.deepest); d > depth {
						depth = d
					}
					flow += q.open
					i = end
					if wasLoose {
						unsure = true // its closing quote may be the decoders' opening one
					}
				}
			}
			if (c != ' ' && c != '\t') || indicator {
				afterIndicator = indicator
			}
			// Each open bracket may hold two levels: "[k: v]" is a
			// sequence of a mapping.
			if d := len(indents) + lineDepth + 2*flow; d > depth {
				depth = d
			}
		}
		if flow == 0 && quote == 0 && start == 0 && !unsure {
			if col, ok := blockScalarHeader(line); ok {
				blockScalar = max(indent, col)
			}
		}
		if depth > maxDepth {
			return depth
		}
	}
	return depth
}

// quoted is what the text of a quoted scalar would add if it were
// structure: the brackets it leaves open, and how deep they nest within it.
type quoted struct{ open, deepest int }

// add takes in more of the text.
func (q *quoted) add(text []byte) {
	for _, c := range text {
		switch c {
		case '[', '{':
			q.open++
			q.deepest = max(q.deepest, q.open)
		case ']', '}':
			q.open = max(q.open-1, 0)
		}
	}
}

// hasQuote says whether b holds a quote character.
func hasQuote(b []byte) bool { return bytes.ContainsAny(b, "\"'") }

// mayAlias says whether text may hold an alias of one of its anchors: an
// "*" and an "&" before the same name, anywhere. The decoders refuse an
// alias that names no anchor, so without such a pair there is nothing to
// expand. Looked for in the whole text, not where the scan thinks a node
// starts, which it may misjudge. Descriptions that hold "*" and "&"
// ("*.example.com", "R&D") are so not counted again. Past maxAnchors
// anchors, any "*" will do.
func mayAlias(text []byte) bool {
	anchors := map[string]bool{}
	for i := bytes.IndexByte(text, '&'); i >= 0; {
		if name := markedName(text[i+1:]); name != nil {
			if len(anchors) >= maxAnchors {
				return bytes.IndexByte(text, '*') >= 0
			}
			anchors[string(name)] = true
		}
		j := bytes.IndexByte(text[i+1:], '&')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	if len(anchors) == 0 {
		return false
	}
	for i := bytes.IndexByte(text, '*'); i >= 0; {
		if name := markedName(text[i+1:]); name != nil && anchors[string(name)] {
			return true
		}
		j := bytes.IndexByte(text[i+1:], '*')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

// isNameChar: c may be in an anchor's or alias's name.
func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// maxAnchors bounds the names mayAlias keeps.
const maxAnchors = 4096

// markedName is the anchor or alias name b starts with, nil if none: the
// decoders' names (yaml.v2's and yaml.v3's scanners alike) are one or more
// ASCII letters, digits, "-" and "_"; what follows them they check.
func markedName(b []byte) []byte {
	n := 0
	for n < len(b) && isNameChar(b[n]) {
		n++
	}
	if n == 0 {
		return nil
	}
	return b[:n]
}

// closingQuote is the index of the quote q that closes a quoted scalar
// opened at line[start] (-1: on an earlier line), or -1 if none does on this
// line.
func closingQuote(line []byte, start int, q byte) int {
	for i := start + 1; i < len(line); i++ {
		switch {
		case q == '"' && line[i] == '\\':
			i++ // an escaped character
		case line[i] == q && q == '\'' && i+1 < len(line) && line[i+1] == '\'':
			i++ // '' is a quote in a single-quoted scalar
		case line[i] == q:
			return i
		}
	}
	return -1
}

// withoutComment is line up to its first " #" or tab-"#", which starts a
// comment unless it is inside a quoted scalar: cutting there too only
// leaves less of a line to find a block scalar header at the end of.
func withoutComment(line []byte) []byte {
	for i := 1; i < len(line); i++ {
		if line[i] == '#' && (line[i-1] == ' ' || line[i-1] == '\t') {
			return line[:i]
		}
	}
	return line
}

// nextLine splits text at its first line break, as the decoders see them.
func nextLine(text []byte) (line, rest []byte) {
	for i, c := range text {
		switch c {
		case '\n', '\r', 0xc2, 0xe2:
			if n := lineBreak(text[i:]); n > 0 {
				if c == '\r' && i+1 < len(text) && text[i+1] == '\n' {
					n = 2
				}
				return text[:i], text[i+n:]
			}
		}
	}
	return text, nil
}

// lineBreak is the length of the line break b starts with, 0 if none:
// besides "\n", YAML 1.1 breaks lines at CR, NEL (C2 85), LS (E2 80 A8)
// and PS (E2 80 A9).
func lineBreak(b []byte) int {
	switch {
	case len(b) == 0:
		return 0
	case b[0] == '\r' || b[0] == '\n':
		return 1
	case len(b) > 1 && b[0] == 0xc2 && b[1] == 0x85:
		return 2
	case len(b) > 2 && b[0] == 0xe2 && b[1] == 0x80 && (b[2] == 0xa8 || b[2] == 0xa9):
		return 3
	}
	return 0
}

// blockScalarHeader says whether line ends with a block scalar header
// ("|", ">", with indentation and chomping indicators) that certainly is
// one: after an indicator ("key:", "-", "?") and the node's properties
// (tags, anchors), on a line without quotes (a header inside a quoted
// scalar begun on an earlier line is text). One the decoders would not
// take for a header is not taken for one, so no structure is skipped as
// text.
// Its column is that of the indicator or key before the header: its
// text is what is indented more (the innermost block collection's
// indentation, as in "- - |" or "- k: |").
func blockScalarHeader(line []byte) (col int, ok bool) {
	line = withoutComment(line)
	if hasQuote(line) || bytes.IndexByte(line, '#') >= 0 {
		return 0, false
	}
	// Fields are split at YAML's blanks, not at every Unicode space as
	// bytes.Fields would (allocating a slice per line): "k:\u00a0|" is no
	// header to the decoders.
	start, end := lastField(line, len(line))
	if start < 0 || !isHeader(line[start:end]) {
		return 0, false
	}
	start, end = lastField(line, start)
	for start >= 0 && (line[start] == '!' || line[start] == '&') {
		start, end = lastField(line, start)
	}
	if start < 0 {
		return 0, true
	}
	f := line[start:end]
	// Its last occurrence: if in a later field, a column further in.
	col = bytes.LastIndex(line, f)
	return col, len(f) == 1 && (f[0] == '-' || f[0] == '?') || f[len(f)-1] == ':'
}

// openEntry opens the level of a block entry ("-" or "?") at column col:
// its node is a level of its own, indented past the indicator, so "- k:"
// lines indented by two nest twice per line.
func openEntry(indents []int, col int) []int {
	if len(indents) == 0 || indents[len(indents)-1] <= col {
		return append(indents, col+1)
	}
	return indents
}

// lastField is where the last blank-separated field of line[:end] starts
// and ends; -1 if there is none.
func lastField(line []byte, end int) (start, stop int) {
	for end > 0 && (line[end-1] == ' ' || line[end-1] == '\t') {
		end--
	}
	if end == 0 {
		return -1, -1
	}
	start = end
	for start > 0 && line[start-1] != ' ' && line[start-1] != '\t' {
		start--
	}
	return start, end
}

// indicatorsIn counts the ": ", "- " and "? " of b, levels each may open.
func indicatorsIn(b []byte) (n int) {
	for i, c := range b {
		if (c == ':' || c == '-' || c == '?') && (i+1 == len(b) || b[i+1] == ' ' || b[i+1] == '\t') {
			n++
		}
	}
	return n
}

// isHeader: "|" or ">", then indentation and chomping indicators.
func isHeader(f []byte) bool {
	if f[0] != '|' && f[0] != '>' {
		return false
	}
	for _, c := range f[1:] {
		if c != '-' && c != '+' && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// expandedNodes counts the nodes of the YAML text with every alias replaced
// by the node it names, and how deeply they then nest, stopping early once
// over limit nodes or maxDepth levels.
func expandedNodes(text []byte, limit, maxDepth int) (nodes, depth int, err error) {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(text, &doc); err != nil {
		return 0, 0, err
	}
	type cost struct{ nodes, depth int }
	memo := map[*yamlv3.Node]cost{}
	var count func(n *yamlv3.Node) cost
	count = func(n *yamlv3.Node) cost {
		if n == nil {
			return cost{}
		}
		if c, ok := memo[n]; ok {
			return c
		}
		memo[n] = cost{limit + 1, maxDepth + 1} // a node that contains itself expands forever
		c := cost{nodes: 1}
		if n.Kind == yamlv3.AliasNode {
			c = count(n.Alias)
		}
		for _, child := range n.Content {
			cc := count(child)
			c.nodes += cc.nodes
			c.depth = max(c.depth, cc.depth)
			if c.nodes > limit || c.depth > maxDepth {
				break
			}
		}
		if n.Kind == yamlv3.MappingNode || n.Kind == yamlv3.SequenceNode {
			c.depth++
		}
		c = cost{min(c.nodes, limit+1), min(c.depth, maxDepth+1)}
		memo[n] = c
		return c
	}
	c := count(&doc)
	return c.nodes, c.depth, nil
}
