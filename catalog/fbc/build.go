package fbc

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// The files of a stored catalog document.
const (
	// DocumentFile holds every blob as one line of compact JSON, grouped
	// by package (packages in name order, then blobs of no package).
	DocumentFile = "all.jsonl"
	// IndexFile is the Index of DocumentFile, as JSON.
	IndexFile = "index.json"
)

// Schemas this package validates; any other schema is carried through.
const (
	SchemaPackage      = "olm.package"
	SchemaChannel      = "olm.channel"
	SchemaBundle       = "olm.bundle"
	SchemaDeprecations = "olm.deprecations"
)

// Index locates each package's lines in DocumentFile.
type Index struct {
	// Digest is "sha256:<hex>" of DocumentFile.
	Digest string `json:"digest"`
	// Size is DocumentFile's size in bytes.
	Size     int64          `json:"size"`
	Counts   Counts         `json:"counts"`
	Packages []PackageIndex `json:"packages"`
	// Others are the blobs of no package (or of a package the catalog has
	// no olm.package blob for), after every package.
	Others Range `json:"others"`
}

// Counts sum up a catalog.
type Counts struct {
	Packages int `json:"packages"`
	Channels int `json:"channels"`
	Bundles  int `json:"bundles"`
	Blobs    int `json:"blobs"`
}

// Range is a byte range of DocumentFile.
type Range struct {
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
}

// PackageIndex is one package's place in DocumentFile.
type PackageIndex struct {
	Name           string `json:"name"`
	DefaultChannel string `json:"defaultChannel"`
	Channels       int    `json:"channels"`
	Bundles        int    `json:"bundles"`
	Range
}

// Package returns the index entry of the named package.
func (x *Index) Package(name string) (PackageIndex, bool) {
	i, ok := slices.BinarySearchFunc(x.Packages, name, func(p PackageIndex, n string) int { return strings.Compare(p.Name, n) })
	if !ok {
		return PackageIndex{}, false
	}
	return x.Packages[i], true
}

// Build reads the catalog in fsys (its configs/ directory when there is
// one), validates it and writes DocumentFile and IndexFile into dir, an
// existing directory. Errors name the file, the blob and the object.
func Build(fsys fs.FS, dir string, l Limits) (*Index, error) {
	l = l.OrDefault()
	spool, err := os.CreateTemp(dir, ".spool-*")
	if err != nil {
		return nil, fmt.Errorf("creating catalog spool: %w", err)
	}
	defer func() {
		spool.Close()
		os.Remove(spool.Name())
	}()
	b := &builder{l: l, spool: bufio.NewWriterSize(spool, 256<<10), pkgs: map[string]*pkgMeta{}, groups: map[string]string{}}
	top := root(fsys)
	files := 0
	err = walk(fsys, top, func(name string) error {
		files++
		return b.readFile(fsys, name)
	})
	if err != nil {
		return nil, err
	}
	if err := b.spool.Flush(); err != nil {
		return nil, fmt.Errorf("writing catalog spool: %w", err)
	}
	if len(b.blobs) == 0 {
		where := "the content root"
		if top != "." {
			where = top + "/"
		}
		return nil, fmt.Errorf("not a file-based catalog: no blobs in %d .json/.yaml/.yml files under %s", files, where)
	}
	if err := b.validate(); err != nil {
		return nil, err
	}
	return b.write(spool, dir)
}

// origin is where an object came from: a file and the blob's 1-based
// number in it.
type origin struct {
	file *string
	blob int
}

func (o origin) String() string { return fmt.Sprintf("%s: blob %d", *o.file, o.blob) }

type pkgMeta struct {
	name           string
	origin         *origin // of the olm.package blob
	defaultChannel string
	channels       []*channelMeta
	bundles        map[string]origin
	deprecations   *origin
	deprecated     []depRef
}

type channelMeta struct {
	name    string
	origin  origin
	entries []entry
}

type entry struct {
	Name      string   `json:"name"`
	Replaces  string   `json:"replaces"`
	Skips     []string `json:"skips"`
	SkipRange string   `json:"skipRange"`
}

type depRef struct {
	origin        origin
	schema, name  string
	entryPosition int
}

// spooled is one blob's line in the spool.
type spooled struct {
	group  string
	offset int64
	length int64
}

type builder struct {
	l       Limits
	spool   *bufio.Writer
	written int64
	total   int64
	entries int
	blobs   []spooled
	pkgs    map[string]*pkgMeta
	order   []string          // packages in order of first mention
	groups  map[string]string // interned package names
	errs    []string
}

// maxErrors is how many validation errors one Build reports.
const maxErrors = 10

func (b *builder) fail(format string, args ...any) {
	b.errs = append(b.errs, fmt.Sprintf(format, args...))
}

// countingReader holds the catalog's files together to MaxTotalBytes.
type countingReader struct {
	r io.Reader
	b *builder
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.b.total += int64(n)
	if c.b.total > c.b.l.MaxTotalBytes {
		return n, fmt.Errorf("the catalog's files are larger than %d bytes together", c.b.l.MaxTotalBytes)
	}
	return n, err
}

func (b *builder) readFile(fsys fs.FS, name string) error {
	f, err := fsys.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	file := name
	br := bufio.NewReaderSize(&countingReader{r: f, b: b}, 64<<10)
	head, _ := br.Peek(512)
	isJSON := strings.HasSuffix(name, ".json") || strings.HasPrefix(strings.TrimSpace(string(head)), "{")
	r := &blobReader{r: br, json: isJSON, l: b.l}
	for n := 1; ; n++ {
		line, err := r.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		o := origin{file: &file, blob: n}
		if err != nil {
			return fmt.Errorf("%s: %w", o, err)
		}
		if len(b.blobs) >= b.l.MaxBlobs {
			return fmt.Errorf("%s: the catalog has more than %d blobs", o, b.l.MaxBlobs)
		}
		group, err := b.take(o, line)
		if err != nil {
			return err
		}
		if len(b.errs) >= maxErrors {
			return b.errors()
		}
		if _, err := b.spool.Write(line); err != nil {
			return fmt.Errorf("writing catalog spool: %w", err)
		}
		if err := b.spool.WriteByte('\n'); err != nil {
			return fmt.Errorf("writing catalog spool: %w", err)
		}
		size := int64(len(line)) + 1
		b.blobs = append(b.blobs, spooled{group: group, offset: b.written, length: size})
		b.written += size
	}
}

// meta is what validation reads of a blob.
type meta struct {
	Schema         *string         `json:"schema"`
	Package        *string         `json:"package"`
	Name           string          `json:"name"`
	DefaultChannel string          `json:"defaultChannel"`
	Image          string          `json:"image"`
	Entries        json.RawMessage `json:"entries"`
	Properties     json.RawMessage `json:"properties"`
}

type property struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// take checks one blob's required fields and records what validation of
// the whole catalog needs. It returns the blob's package ("" for none).
// Errors that stop reading are returned; others are collected.
func (b *builder) take(o origin, line []byte) (string, error) {
	var m meta
	if err := json.Unmarshal(line, &m); err != nil {
		return "", fmt.Errorf("%s: %w", o, err)
	}
	if m.Schema == nil || *m.Schema == "" {
		return "", fmt.Errorf("%s: has no schema (is this a file-based catalog?)", o)
	}
	schema := *m.Schema
	if m.Package != nil && *m.Package == "" {
		b.fail("%s (%s): package is set but empty", o, schema)
	}
	pkg := ""
	if m.Package != nil {
		pkg = *m.Package
	}
	if err := b.names(o, pkg, m.Name); err != nil {
		return "", err
	}
	props, err := b.properties(o, schema, m.Properties)
	if err != nil {
		return "", err
	}
	switch schema {
	case SchemaPackage:
		b.takePackage(o, &m)
		pkg = m.Name
	case SchemaChannel:
		if err := b.takeChannel(o, pkg, &m); err != nil {
			return "", err
		}
	case SchemaBundle:
		b.takeBundle(o, pkg, &m, props)
	case SchemaDeprecations:
		if err := b.takeDeprecations(o, pkg, &m); err != nil {
			return "", err
		}
	}
	return b.intern(pkg), nil
}

func (b *builder) names(o origin, names ...string) error {
	for _, n := range names {
		if len(n) > b.l.MaxNameBytes {
			return fmt.Errorf("%s: a name is longer than %d bytes", o, b.l.MaxNameBytes)
		}
	}
	return nil
}

func (b *builder) intern(s string) string {
	if v, ok := b.groups[s]; ok {
		return v
	}
	b.groups[s] = s
	return s
}

func (b *builder) pkg(name string) *pkgMeta {
	p := b.pkgs[name]
	if p == nil {
		name = b.intern(name)
		p = &pkgMeta{name: name, bundles: map[string]origin{}}
		b.pkgs[name] = p
		b.order = append(b.order, name)
	}
	return p
}

func (b *builder) properties(o origin, schema string, raw json.RawMessage) ([]property, error) {
	if len(raw) == 0 || string(raw) == "null" {
		if schema == SchemaBundle {
			b.fail("%s (%s): has no properties", o, schema)
		}
		return nil, nil
	}
	var props []property
	if err := json.Unmarshal(raw, &props); err != nil {
		return nil, fmt.Errorf("%s (%s): properties: %w", o, schema, err)
	}
	for i, p := range props {
		if p.Type == "" {
			b.fail("%s (%s): properties[%d] has no type", o, schema, i)
		}
		if len(p.Value) == 0 || string(p.Value) == "null" {
			b.fail("%s (%s): properties[%d] (%s) has no value", o, schema, i, p.Type)
		}
	}
	return props, nil
}

func describe(schema, name, pkg string) string {
	switch {
	case name != "" && pkg != "":
		return fmt.Sprintf("%s %q of package %q", schema, name, pkg)
	case name != "":
		return fmt.Sprintf("%s %q", schema, name)
	case pkg != "":
		return fmt.Sprintf("%s of package %q", schema, pkg)
	}
	return schema
}

func (b *builder) takePackage(o origin, m *meta) {
	if m.Name == "" {
		b.fail("%s (%s): has no name", o, SchemaPackage)
		return
	}
	p := b.pkg(m.Name)
	what := describe(SchemaPackage, m.Name, "")
	if p.origin != nil {
		b.fail("%s (%s): duplicate package, first defined at %s", o, what, p.origin)
		return
	}
	oo := o
	p.origin = &oo
	p.defaultChannel = b.intern(m.DefaultChannel)
	if m.DefaultChannel == "" {
		b.fail("%s (%s): has no defaultChannel", o, what)
	}
}

func (b *builder) takeChannel(o origin, pkg string, m *meta) error {
	what := describe(SchemaChannel, m.Name, pkg)
	if m.Name == "" || pkg == "" {
		b.fail("%s (%s): needs a name and a package", o, what)
		return nil
	}
	// Decoded one entry at a time, counted against the catalog's limit
	// before each is kept.
	var entries []entry
	if len(m.Entries) > 0 && string(m.Entries) != "null" {
		dec := json.NewDecoder(bytes.NewReader(m.Entries))
		if _, err := dec.Token(); err != nil {
			return fmt.Errorf("%s (%s): entries: %w", o, what, err)
		}
		for dec.More() {
			var e entry
			if err := dec.Decode(&e); err != nil {
				return fmt.Errorf("%s (%s): entries: %w", o, what, err)
			}
			if b.entries += 1 + len(e.Skips); b.entries > b.l.MaxEntries {
				return fmt.Errorf("%s (%s): the catalog has more than %d channel entries and skips", o, what, b.l.MaxEntries)
			}
			if err := b.names(o, e.Name, e.Replaces, e.SkipRange); err != nil {
				return err
			}
			if err := b.names(o, e.Skips...); err != nil {
				return err
			}
			entries = append(entries, e)
		}
	}
	p := b.pkg(pkg)
	for _, c := range p.channels {
		if c.name == m.Name {
			b.fail("%s (%s): duplicate channel, first defined at %s", o, what, c.origin)
			return nil
		}
	}
	for i := range entries {
		e := &entries[i]
		e.Name, e.Replaces = b.intern(e.Name), b.intern(e.Replaces)
		for j := range e.Skips {
			e.Skips[j] = b.intern(e.Skips[j])
		}
	}
	p.channels = append(p.channels, &channelMeta{name: m.Name, origin: o, entries: entries})
	return nil
}

func (b *builder) takeBundle(o origin, pkg string, m *meta, props []property) {
	what := describe(SchemaBundle, m.Name, pkg)
	if m.Name == "" || pkg == "" {
		b.fail("%s (%s): needs a name and a package", o, what)
		return
	}
	if m.Image == "" {
		b.fail("%s (%s): has no image", o, what)
	}
	p := b.pkg(pkg)
	if first, ok := p.bundles[m.Name]; ok {
		b.fail("%s (%s): duplicate bundle, first defined at %s", o, what, first)
		return
	}
	p.bundles[b.intern(m.Name)] = o
	found := 0
	for _, prop := range props {
		if prop.Type != SchemaPackage {
			continue
		}
		found++
		var v struct {
			PackageName string `json:"packageName"`
			Version     string `json:"version"`
		}
		if err := json.Unmarshal(prop.Value, &v); err != nil {
			b.fail("%s (%s): olm.package property: %v", o, what, err)
			continue
		}
		if v.PackageName != pkg {
			b.fail("%s (%s): olm.package property names package %q", o, what, v.PackageName)
		}
		if _, err := parseVersion(v.Version); err != nil {
			b.fail("%s (%s): olm.package property: version %q: %v", o, what, v.Version, err)
		}
	}
	if found != 1 {
		b.fail("%s (%s): has %d olm.package properties, needs exactly one", o, what, found)
	}
}

func (b *builder) takeDeprecations(o origin, pkg string, m *meta) error {
	what := describe(SchemaDeprecations, "", pkg)
	if pkg == "" {
		b.fail("%s (%s): has no package", o, what)
		return nil
	}
	if m.Name != "" {
		b.fail("%s (%s): may not have a name", o, what)
	}
	var entries []struct {
		Reference struct {
			Schema string `json:"schema"`
			Name   string `json:"name"`
		} `json:"reference"`
		Message string `json:"message"`
	}
	if len(m.Entries) > 0 {
		if err := json.Unmarshal(m.Entries, &entries); err != nil {
			return fmt.Errorf("%s (%s): entries: %w", o, what, err)
		}
	}
	b.entries += len(entries)
	if b.entries > b.l.MaxEntries {
		return fmt.Errorf("%s (%s): the catalog has more than %d channel entries and skips", o, what, b.l.MaxEntries)
	}
	p := b.pkg(pkg)
	if p.deprecations != nil {
		b.fail("%s (%s): duplicate deprecations of the package, first at %s", o, what, p.deprecations)
		return nil
	}
	p.deprecations = &o
	for i, e := range entries {
		if err := b.names(o, e.Reference.Name); err != nil {
			return err
		}
		if e.Message == "" {
			b.fail("%s (%s): entries[%d] has no message", o, what, i)
		}
		switch e.Reference.Schema {
		case SchemaPackage:
			if e.Reference.Name != "" {
				b.fail("%s (%s): entries[%d]: an olm.package reference has no name", o, what, i)
			}
		case SchemaChannel, SchemaBundle:
			if e.Reference.Name == "" {
				b.fail("%s (%s): entries[%d]: an %s reference needs a name", o, what, i, e.Reference.Schema)
				continue
			}
			p.deprecated = append(p.deprecated, depRef{origin: o, schema: e.Reference.Schema, name: b.intern(e.Reference.Name), entryPosition: i})
		default:
			b.fail("%s (%s): entries[%d]: reference schema %q is not olm.package, olm.channel or olm.bundle", o, what, i, e.Reference.Schema)
		}
	}
	return nil
}

func (b *builder) errors() error {
	if len(b.errs) == 0 {
		return nil
	}
	errs := b.errs
	more := ""
	if len(errs) > maxErrors {
		more = fmt.Sprintf("; and %d more", len(errs)-maxErrors)
		errs = errs[:maxErrors]
	}
	return errors.New(strings.Join(errs, "; ") + more)
}

// write copies the spooled blobs into dir's DocumentFile grouped by
// package, and writes the IndexFile.
func (b *builder) write(spool *os.File, dir string) (*Index, error) {
	names := make([]string, 0, len(b.pkgs))
	for name, p := range b.pkgs {
		if p.origin != nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	rank := make(map[string]int, len(names))
	for i, n := range names {
		rank[n] = i
	}
	others := len(names)
	groupOf := func(s spooled) int {
		if r, ok := rank[s.group]; ok {
			return r
		}
		return others
	}
	// Stable: a package's blobs keep the catalog's order.
	sort.SliceStable(b.blobs, func(i, j int) bool { return groupOf(b.blobs[i]) < groupOf(b.blobs[j]) })

	doc, err := os.Create(filepath.Join(dir, DocumentFile))
	if err != nil {
		return nil, fmt.Errorf("creating catalog document: %w", err)
	}
	defer doc.Close()
	h := sha256.New()
	w := bufio.NewWriterSize(io.MultiWriter(doc, h), 256<<10)
	x := &Index{Packages: make([]PackageIndex, len(names))}
	for i, n := range names {
		p := b.pkgs[n]
		x.Packages[i] = PackageIndex{Name: n, DefaultChannel: p.defaultChannel, Channels: len(p.channels), Bundles: len(p.bundles)}
		x.Counts.Channels += len(p.channels)
		x.Counts.Bundles += len(p.bundles)
	}
	x.Counts.Packages = len(names)
	x.Counts.Blobs = len(b.blobs)
	var off int64
	cur := -1
	for _, s := range b.blobs {
		g := groupOf(s)
		if g != cur {
			cur = g
			if g < others {
				x.Packages[g].Offset = off
			} else {
				x.Others.Offset = off
			}
		}
		if _, err := io.Copy(w, io.NewSectionReader(spool, s.offset, s.length)); err != nil {
			return nil, fmt.Errorf("writing catalog document: %w", err)
		}
		off += s.length
		if g < others {
			x.Packages[g].Length += s.length
		} else {
			x.Others.Length += s.length
		}
	}
	if x.Others.Length == 0 {
		x.Others.Offset = off
	}
	if err := w.Flush(); err != nil {
		return nil, fmt.Errorf("writing catalog document: %w", err)
	}
	if err := doc.Sync(); err != nil {
		return nil, fmt.Errorf("writing catalog document: %w", err)
	}
	x.Size = off
	x.Digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	data, err := json.Marshal(x)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, IndexFile), data, 0o644); err != nil {
		return nil, fmt.Errorf("writing catalog index: %w", err)
	}
	return x, nil
}
