package jsonmap

import (
	"bytes"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The block decoder reads the YAML that manifests are written in (block
// mappings and sequences; plain, quoted, literal and folded scalars;
// comments; empty flow collections) straight into the values FromYAML
// returns: no token, event or node per scalar, no map[any]any between.
// The YAML parser allocated ~20 bytes per byte of a bundle's manifests,
// the floor of every install; this decoder allocates the values alone.
//
// It answers only documents it reads completely and exactly as yaml.v2
// does; at anything else (anchors, tags, flow collections with content,
// a tab, a key that is not a string, a line it does not expect) it gives
// up and the document goes to yaml.v2, so errors, and every construct it
// does not know, are yaml.v2's. FuzzFromYAML holds the two to the same
// answers.

// maxKeyBytes bounds implicit keys below the 1,024 characters yaml.v2
// accepts.
const maxKeyBytes = 1000

// block is a decode of one document: text is the document, pos the start
// of the line the decoder is at (or a position within it, while a line
// is read).
type block struct {
	*decoder
	text []byte
	pos  int

	// The last line nextLine found, and where it looked from: the
	// collections that end at one line all look for it from there.
	seenFrom, seenStart, seenIndent int
	seenOK                          bool
}

// fromBlock decodes text, a document whose top level is a block mapping
// (or that holds no node), and whether it could.
func fromBlock(text []byte) (map[string]any, bool) {
	// An explicit start of the document, as a file's first line often is.
	text = bytes.TrimPrefix(text, []byte("---\n"))
	if !plainText(text) {
		return nil, false
	}
	b := block{decoder: getDecoder(), text: text, seenFrom: -1}
	b.depth = 0
	defer b.release()
	ls, ind, ok := b.nextLine(0)
	if !ok {
		return nil, true // comments and blank lines: an empty document
	}
	if ind != 0 || !b.isKey(ls) {
		return nil, false
	}
	b.pos = ls
	m, ok := b.mapping(0)
	if !ok {
		return nil, false
	}
	if _, _, more := b.nextLine(b.pos); more {
		return nil, false
	}
	return m, true
}

// plainText reports whether text holds only what the block decoder reads:
// line feeds and printable characters, no tab (nor carriage return, byte
// order mark or other break), no directive and no document marker.
func plainText(text []byte) bool {
	lineStart := true
	for i := 0; i < len(text); {
		c := text[i]
		if lineStart && (c == '%' || (c == '-' || c == '.') && bytes.HasPrefix(text[i:], []byte{c, c, c})) {
			return false
		}
		lineStart = c == '\n'
		if c < utf8.RuneSelf {
			if c < ' ' && c != '\n' || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(text[i:])
		// yaml.v2's printable characters, less the breaks (U+0085,
		// U+2028, U+2029) and the byte order mark.
		if r == utf8.RuneError && size == 1 || r < 0xa0 || r == 0x2028 || r == 0x2029 || r == 0xfeff ||
			0xd800 <= r && r < 0xe000 || r == 0xfffe || r == 0xffff {
			return false
		}
		i += size
	}
	return true
}

// lineEnd is the index of the line feed that ends the line holding i, or
// len(text).
func (b *block) lineEnd(i int) int {
	if n := bytes.IndexByte(b.text[i:], '\n'); n >= 0 {
		return i + n
	}
	return len(b.text)
}

// nextLine finds the first line at or after the line start i that holds a
// node (not blank, not a comment): its start past its indentation, and
// the indentation.
func (b *block) nextLine(i int) (start, indent int, ok bool) {
	if i == b.seenFrom {
		return b.seenStart, b.seenIndent, b.seenOK
	}
	b.seenFrom = i
	b.seenStart, b.seenIndent, b.seenOK = b.findLine(i)
	return b.seenStart, b.seenIndent, b.seenOK
}

func (b *block) findLine(i int) (start, indent int, ok bool) {
	for i < len(b.text) {
		j := i
		for j < len(b.text) && b.text[j] == ' ' {
			j++
		}
		if j < len(b.text) && b.text[j] != '\n' && b.text[j] != '#' {
			return j, j - i, true
		}
		i = b.lineEnd(j) + 1
	}
	return len(b.text), 0, false
}

// column is the column of i.
func (b *block) column(i int) int {
	return i - (bytes.LastIndexByte(b.text[:i], '\n') + 1)
}

// rest skips spaces from i and reports whether the line ends there (or a
// comment starts), and where its next line starts.
func (b *block) rest(i int) (next int, end bool) {
	for i < len(b.text) && b.text[i] == ' ' {
		i++
	}
	if i == len(b.text) {
		return i, true
	}
	switch b.text[i] {
	case '\n':
		return i + 1, true
	case '#':
		if b.text[i-1] == ' ' {
			return b.lineEnd(i) + 1, true
		}
	}
	return i, false
}

// entry reports whether a block sequence entry ("- " or a lone "-")
// starts at i.
func (b *block) entry(i int) bool {
	return b.text[i] == '-' && (i+1 == len(b.text) || b.text[i+1] == ' ' || b.text[i+1] == '\n')
}

// plainStart reports whether a plain scalar may start at i.
func (b *block) plainStart(i int) bool {
	switch b.text[i] {
	case '-', '?', ':':
		return i+1 < len(b.text) && b.text[i+1] != ' ' && b.text[i+1] != '\n'
	case ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
		return false
	}
	return true
}

// key finds the implicit key at i: where it ends (trailing spaces
// excluded, closing quote included) and where its ':' is.
func (b *block) key(i int) (end, colon int, ok bool) {
	switch q := b.text[i]; q {
	case '"', '\'':
		j := i + 1
		for j < len(b.text) && b.text[j] != '\n' {
			switch {
			case q == '"' && b.text[j] == '\\':
				if j+1 < len(b.text) && b.text[j+1] == '\n' {
					return 0, 0, false
				}
				j += 2
				continue
			case b.text[j] == q && q == '\'' && j+1 < len(b.text) && b.text[j+1] == '\'':
				j += 2
				continue
			case b.text[j] == q:
				if j+1 < len(b.text) && b.text[j+1] == ':' && (j+2 == len(b.text) || b.text[j+2] == ' ' || b.text[j+2] == '\n') {
					return j + 1, j + 1, true
				}
				return 0, 0, false
			}
			j++
		}
		return 0, 0, false
	}
	if !b.plainStart(i) {
		return 0, 0, false
	}
	for j := i; j < len(b.text) && b.text[j] != '\n'; j++ {
		switch b.text[j] {
		case ':':
			if j+1 == len(b.text) || b.text[j+1] == ' ' || b.text[j+1] == '\n' {
				end := j
				for b.text[end-1] == ' ' {
					end--
				}
				return end, j, true
			}
		case '#':
			if b.text[j-1] == ' ' {
				return 0, 0, false
			}
		}
	}
	return 0, 0, false
}

func (b *block) isKey(i int) bool {
	_, _, ok := b.key(i)
	return ok
}

// mapping decodes the block mapping whose first key is at b.pos, in
// column indent, and leaves b.pos at the start of the line after it.
func (b *block) mapping(indent int) (map[string]any, bool) {
	if b.depth++; b.depth > maxDepth {
		return nil, false
	}
	start := len(b.members)
	for {
		end, colon, ok := b.key(b.pos)
		if !ok || colon-b.pos > maxKeyBytes {
			return nil, false
		}
		var key string
		switch b.text[b.pos] {
		case '"':
			if key, ok = b.doubleQuoted(b.pos+1, end-1); !ok {
				return nil, false
			}
		case '\'':
			key = b.singleQuoted(b.pos+1, end-1)
		default:
			raw := b.text[b.pos:end]
			if resolvePlain[raw[0]] && !isString(resolveYAML(string(raw))) || string(raw) == "<<" {
				return nil, false // a key of another kind, or a merge
			}
			key = b.internKey(raw)
		}
		b.pos = colon + 1
		if key == SharedKey {
			b.shared++
		}
		v, ok := b.value(indent)
		if key == SharedKey {
			b.shared--
		}
		if !ok {
			return nil, false
		}
		b.members = append(b.members, member{key, v})
		ls, ind, more := b.nextLine(b.pos)
		if !more || ind < indent {
			b.pos = ls - ind
			break
		}
		if ind > indent || b.entry(ls) {
			return nil, false
		}
		b.pos = ls
	}
	b.depth--
	return b.popMembers(start), true
}

// keep keeps buf, grown, for the next scalar, unless one huge scalar grew
// it (an idle decoder keeps only small stacks).
func (b *block) keep(buf []byte) {
	if cap(buf) <= maxStackKeep {
		b.scratch = buf[:0]
	}
}

func isString(v any) bool {
	_, ok := v.(string)
	return ok
}

// value decodes the value after a key's ':' at b.pos, in a mapping at
// column indent.
func (b *block) value(indent int) (any, bool) {
	next, end := b.rest(b.pos)
	if !end {
		return b.inline(indent, next)
	}
	ls, ind, more := b.nextLine(next)
	switch {
	case !more || ind < indent || ind == indent && !b.entry(ls):
		b.pos = next
		return nil, true
	case ind == indent: // a sequence in the mapping's column
		b.pos = ls
		return b.sequence(ind)
	}
	b.pos = ls
	return b.ownLine(indent, ind)
}

// ownLine decodes the node that starts a line, at b.pos in column col,
// under a collection at column parent.
func (b *block) ownLine(parent, col int) (any, bool) {
	switch {
	case b.entry(b.pos):
		return b.sequence(col)
	case b.isKey(b.pos):
		return b.mapping(col)
	case b.plainStart(b.pos):
		return b.plain(parent, b.pos)
	}
	return nil, false
}

// sequence decodes the block sequence whose first entry is at b.pos, in
// column indent.
func (b *block) sequence(indent int) ([]any, bool) {
	if b.depth++; b.depth > maxDepth {
		return nil, false
	}
	start := len(b.elements)
	for {
		var v any
		next, end := b.rest(b.pos + 1)
		switch {
		case end:
			ls, ind, more := b.nextLine(next)
			if more && ind > indent {
				b.pos = ls
				var ok bool
				if v, ok = b.ownLine(indent, ind); !ok {
					return nil, false
				}
			} else {
				b.pos = next
			}
		case b.entry(next):
			b.pos = next
			s, ok := b.sequence(b.column(next))
			if !ok {
				return nil, false
			}
			v = s
		case b.isKey(next):
			b.pos = next
			m, ok := b.mapping(b.column(next))
			if !ok {
				return nil, false
			}
			v = m
		default:
			var ok bool
			if v, ok = b.inline(indent, next); !ok {
				return nil, false
			}
		}
		b.elements = append(b.elements, v)
		ls, ind, more := b.nextLine(b.pos)
		if !more || ind < indent || ind == indent && !b.entry(ls) {
			b.pos = ls - ind
			break
		}
		if ind > indent {
			return nil, false
		}
		b.pos = ls
	}
	b.depth--
	return b.popElements(start), true
}

// inline decodes the scalar (or empty flow collection) that starts at i,
// after a key's ':' or an entry's '-', under a collection at column
// parent, and leaves b.pos at the start of the line after it.
func (b *block) inline(parent, i int) (any, bool) {
	switch b.text[i] {
	case '|', '>':
		return b.blockScalar(parent, i)
	case '"', '\'':
		return b.quoted(parent, i)
	case '[', '{':
		if i+1 < len(b.text) && b.text[i+1] == b.text[i]+2 { // "[]" or "{}"
			if next, end := b.rest(i + 2); end {
				b.pos = next
				if b.text[i] == '[' {
					return []any{}, true
				}
				return map[string]any{}, true
			}
		}
		return nil, false
	}
	if !b.plainStart(i) {
		return nil, false
	}
	return b.plain(parent, i)
}

// plain decodes the plain scalar at i, its continuation lines indented
// past column parent.
func (b *block) plain(parent, i int) (any, bool) {
	first, next, comment, ok := b.plainLine(i)
	if !ok {
		return nil, false
	}
	var folded []byte
	for !comment {
		// The next line goes on with the scalar if it is indented past
		// parent; blank lines between are line feeds, a comment ends it.
		ls, blanks := next, 0
		for {
			for ls < len(b.text) && b.text[ls] == ' ' {
				ls++
			}
			if ls == len(b.text) || b.text[ls] != '\n' {
				break
			}
			blanks++
			ls++
		}
		if ls == len(b.text) || b.text[ls] == '#' || b.column(ls) <= parent {
			break
		}
		var line []byte
		var ok bool
		if line, next, comment, ok = b.plainLine(ls); !ok {
			return nil, false
		}
		if folded == nil {
			folded = b.scratch[:0]
			folded = append(folded, first...)
		}
		if blanks == 0 {
			folded = append(folded, ' ')
		}
		for range blanks {
			folded = append(folded, '\n')
		}
		folded = append(folded, line...)
	}
	b.pos = next
	if folded != nil {
		b.keep(folded)
		return b.resolve(folded)
	}
	return b.resolve(first)
}

// plainLine is the part of a plain scalar on the line at i (up to a
// comment, trailing spaces excluded), where the next line starts, and
// whether a comment ends the line (and the scalar). A ": " in it, or a
// ':' ending it, is a key yaml.v2 refuses here.
func (b *block) plainLine(i int) (text []byte, next int, comment, ok bool) {
	end := b.lineEnd(i)
	j := i
	for ; j < end; j++ {
		switch b.text[j] {
		case ':':
			if j+1 == end || b.text[j+1] == ' ' {
				return nil, 0, false, false
			}
		case '#':
			if b.text[j-1] == ' ' {
				end, comment = j, true
			}
		}
	}
	k := end
	for b.text[k-1] == ' ' {
		k--
	}
	return b.text[i:k], min(b.lineEnd(end)+1, len(b.text)), comment, true
}

// quoted decodes the single- or double-quoted scalar at i, which may go
// on over lines (folded as yaml.v2 folds them), and what follows it on its
// last line (a comment at most).
func (b *block) quoted(parent, i int) (any, bool) {
	q := b.text[i]
	// Most are one line without escapes: the document's own bytes.
	if n := bytes.IndexAny(b.text[i+1:b.lineEnd(i)], `'"\`); n >= 0 {
		if j := i + 1 + n; b.text[j] == q && (q == '"' || j+1 == len(b.text) || b.text[j+1] != '\'') {
			next, end := b.rest(j + 1)
			if !end {
				return nil, false
			}
			b.pos = next
			return b.internValue(b.text[i+1 : j]), true
		}
	}
	out := b.scratch[:0]
	j := i + 1
	for {
		// Characters up to a space or a line break.
		escapedBreak := false
	chars:
		for j < len(b.text) && b.text[j] != ' ' && b.text[j] != '\n' {
			switch c := b.text[j]; {
			case c == '\'' && q == '\'' && j+1 < len(b.text) && b.text[j+1] == '\'':
				out = append(out, '\'')
				j += 2
			case c == q:
				next, end := b.rest(j + 1)
				if !end {
					return nil, false
				}
				b.pos = next
				b.keep(out)
				return b.str(out), true
			case c == '\\' && q == '"':
				if j+1 < len(b.text) && b.text[j+1] == '\n' {
					escapedBreak = true
					j += 2
					break chars
				}
				e, ok := b.escape(out, j)
				if !ok {
					return nil, false
				}
				out, j = e.out, e.next
			default:
				out = append(out, c)
				j++
			}
		}
		if j == len(b.text) {
			return nil, false
		}
		// Spaces and line breaks: spaces between words stay; a line
		// break drops the spaces around it and folds to one space, or
		// to a line feed for each blank line after it (an escaped one
		// to nothing but those).
		spaces, breaks := 0, 0
		broken := escapedBreak
		for j < len(b.text) && (b.text[j] == ' ' || b.text[j] == '\n') {
			if b.text[j] == '\n' {
				if broken {
					breaks++
				}
				broken = true
			} else if !broken {
				spaces++
			}
			j++
		}
		switch {
		case !broken:
			for range spaces {
				out = append(out, ' ')
			}
		case !escapedBreak && breaks == 0:
			out = append(out, ' ')
		default:
			for range breaks {
				out = append(out, '\n')
			}
		}
		if broken && j < len(b.text) && b.column(j) <= parent {
			return nil, false // yaml.v2 reads it; this decoder keeps to indented lines
		}
	}
}

type escaped struct {
	out  []byte
	next int
}

// escape appends the escape sequence at j (its backslash) of a
// double-quoted scalar as yaml.v2 reads it.
func (b *block) escape(out []byte, j int) (escaped, bool) {
	if j+1 >= len(b.text) {
		return escaped{}, false
	}
	var r rune
	size := 0
	switch c := b.text[j+1]; c {
	case '0':
		r = 0
	case 'a':
		r = '\a'
	case 'b':
		r = '\b'
	case 't':
		r = '\t'
	case 'n':
		r = '\n'
	case 'v':
		r = '\v'
	case 'f':
		r = '\f'
	case 'r':
		r = '\r'
	case 'e':
		r = 0x1b
	case ' ', '"', '\'', '\\':
		r = rune(c)
	case 'N':
		r = 0x85
	case '_':
		r = 0xa0
	case 'L':
		r = 0x2028
	case 'P':
		r = 0x2029
	case 'x':
		size = 2
	case 'u':
		size = 4
	case 'U':
		size = 8
	default:
		return escaped{}, false // a line break escaped, or an error
	}
	next := j + 2
	if size > 0 {
		if next+size > len(b.text) {
			return escaped{}, false
		}
		v := 0
		for _, c := range b.text[next : next+size] {
			d := hexDigit(c)
			if d < 0 {
				return escaped{}, false
			}
			v = v<<4 | d
		}
		if 0xd800 <= v && v <= 0xdfff || v > 0x10ffff {
			return escaped{}, false
		}
		r = rune(v)
		next += size
	}
	return escaped{utf8.AppendRune(out, r), next}, true
}

func hexDigit(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// doubleQuoted and singleQuoted are a quoted key's text, between the
// quotes (at start and end) on one line.
func (b *block) doubleQuoted(start, end int) (string, bool) {
	if bytes.IndexByte(b.text[start:end], '\\') < 0 {
		return b.internKey(b.text[start:end]), true
	}
	out := b.scratch[:0]
	for j := start; j < end; {
		if b.text[j] != '\\' {
			out = append(out, b.text[j])
			j++
			continue
		}
		n, ok := b.escape(out, j)
		if !ok {
			return "", false
		}
		out, j = n.out, n.next
	}
	b.keep(out)
	return string(out), true
}

func (b *block) singleQuoted(start, end int) string {
	raw := b.text[start:end]
	if bytes.IndexByte(raw, '\'') < 0 {
		return b.internKey(raw)
	}
	return strings.ReplaceAll(string(raw), "''", "'")
}

// blockScalar decodes the literal (|) or folded (>) scalar whose header is
// at i, under a collection at column parent.
func (b *block) blockScalar(parent, i int) (any, bool) {
	literal := b.text[i] == '|'
	strip := false
	h := i + 1
	if h < len(b.text) && b.text[h] == '-' {
		strip = true
		h++
	}
	// Keeping chomping, an indentation indicator, or more on the line:
	// yaml.v2's.
	next, end := b.rest(h)
	if !end || next == len(b.text) && b.text[len(b.text)-1] != '\n' {
		return nil, false
	}
	// The content's indentation is its first non-blank line's; blank
	// lines before it must not be longer.
	indent, lead := -1, 0
	for j := next; j < len(b.text); {
		k := j
		for k < len(b.text) && b.text[k] == ' ' {
			k++
		}
		if k == len(b.text) {
			return nil, false
		}
		if b.text[k] != '\n' {
			indent = k - j
			break
		}
		lead = max(lead, k-j)
		j = k + 1
	}
	if indent <= parent || lead > indent {
		return nil, false // empty, or more-indented blank lines first
	}
	out := b.scratch[:0]
	blanks := 0         // blank lines not yet written
	content := false    // a non-blank line has been written
	moreBefore := false // the last one was more indented
	j := next
	for j < len(b.text) {
		k := j
		for k < len(b.text) && b.text[k] == ' ' && k-j < indent {
			k++
		}
		if k == len(b.text) {
			return nil, false // the last line ends without a line feed
		}
		if b.text[k] == '\n' {
			blanks++
			j = k + 1
			continue
		}
		if k-j < indent {
			break // the first line less indented ends the scalar
		}
		// A more-indented line keeps the line breaks around it, even
		// in a folded scalar.
		more := b.text[k] == ' '
		if more && b.lineBlank(k) {
			return nil, false // spaces past the indentation: content, then a break
		}
		e := b.lineEnd(k)
		if e == len(b.text) {
			return nil, false
		}
		switch {
		case !content || literal || more || moreBefore:
			if content {
				out = append(out, '\n')
			}
			for range blanks {
				out = append(out, '\n')
			}
		case blanks == 0:
			out = append(out, ' ')
		default:
			for range blanks {
				out = append(out, '\n')
			}
		}
		out = append(out, b.text[k:e]...)
		content, blanks, moreBefore = true, 0, more
		j = e + 1
	}
	if !strip {
		out = append(out, '\n')
	}
	b.pos = j
	b.keep(out)
	return b.internValue(out), true
}

// lineBlank reports whether the line holding i has only spaces from i on.
func (b *block) lineBlank(i int) bool {
	for ; i < len(b.text) && b.text[i] != '\n'; i++ {
		if b.text[i] != ' ' {
			return false
		}
	}
	return true
}

// resolve is the value of a plain scalar, as yaml.v2 resolves it and
// FromYAML converts what it resolves to, and whether it is one FromYAML
// converts.
func (b *block) resolve(raw []byte) (any, bool) {
	if !resolvePlain[raw[0]] {
		return b.internValue(raw), true // a string by its first character
	}
	return b.resolveString(string(raw))
}

func (b *block) resolveString(s string) (any, bool) {
	v := resolveYAML(s)
	if s, ok := v.(string); ok {
		if len(s) <= maxValueLen {
			return b.internValue([]byte(s)), true
		}
		return v, true // boxed once
	}
	return fromYAMLValue(v, 0)
}

// resolvePlain marks the first characters of plain scalars yaml.v2 may
// resolve to something other than a string.
var resolvePlain = func() (t [256]bool) {
	for _, c := range "+-0123456789yYnNtTfFoO~." {
		t[c] = true
	}
	return t
}()

var yamlWords = map[string]any{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true,
	"true": true, "True": true, "TRUE": true,
	"on": true, "On": true, "ON": true,
	"n": false, "N": false, "no": false, "No": false, "NO": false,
	"false": false, "False": false, "FALSE": false,
	"off": false, "Off": false, "OFF": false,
	"~": nil, "null": nil, "Null": nil, "NULL": nil,
	".nan": math.NaN(), ".NaN": math.NaN(), ".NAN": math.NaN(),
	".inf": math.Inf(1), ".Inf": math.Inf(1), ".INF": math.Inf(1),
	"+.inf": math.Inf(1), "+.Inf": math.Inf(1), "+.INF": math.Inf(1),
	"-.inf": math.Inf(-1), "-.Inf": math.Inf(-1), "-.INF": math.Inf(-1),
}

var yamlStyleFloat = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

// resolveYAML is what yaml.v2 decodes the untagged plain scalar s to in an
// interface value: a bool, nil, an int, a uint64, a float64, or s.
func resolveYAML(s string) any {
	if v, ok := yamlWords[s]; ok {
		return v
	}
	switch c := s[0]; {
	case c == '.':
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return f
		}
	case c == '+' || c == '-' || '0' <= c && c <= '9':
		if isTimestamp(s) {
			return s // yaml.v2 keeps a timestamp's text in an interface
		}
		p := strings.ReplaceAll(s, "_", "")
		// With a '.' (a version, often) it is no integer: no parse
		// errors to allocate.
		if strings.IndexByte(p, '.') < 0 {
			if n, err := strconv.ParseInt(p, 0, 64); err == nil {
				return int(n)
			}
			if n, err := strconv.ParseUint(p, 0, 64); err == nil {
				return n
			}
		}
		if yamlStyleFloat.MatchString(p) {
			if f, err := strconv.ParseFloat(p, 64); err == nil {
				return f
			}
		}
		if rest, ok := strings.CutPrefix(p, "0b"); ok {
			if n, err := strconv.ParseInt(rest, 2, 64); err == nil {
				return int(n)
			}
			if n, err := strconv.ParseUint(rest, 2, 64); err == nil {
				return n
			}
		} else if rest, ok := strings.CutPrefix(p, "-0b"); ok {
			if n, err := strconv.ParseInt("-"+rest, 2, 64); err == nil {
				return int(n)
			}
		}
	}
	return s
}

// isTimestamp reports whether yaml.v2 reads s as a timestamp.
func isTimestamp(s string) bool {
	i := 0
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	if i != 4 || i == len(s) || s[i] != '-' {
		return false
	}
	for _, layout := range []string{
		"2006-1-2T15:4:5.999999999Z07:00",
		"2006-1-2t15:4:5.999999999Z07:00",
		"2006-1-2 15:4:5.999999999",
		"2006-1-2",
	} {
		if _, err := time.Parse(layout, s); err == nil {
			return true
		}
	}
	return false
}
