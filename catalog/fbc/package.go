package fbc

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// maxIndexBytes bounds an IndexFile read back: one entry per package.
const maxIndexBytes = 64 << 20

// ReadIndex reads the IndexFile of a stored catalog document in dir.
func ReadIndex(dir string) (*Index, error) {
	f, err := os.Open(filepath.Join(dir, IndexFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var x Index
	if err := json.NewDecoder(io.LimitReader(f, maxIndexBytes)).Decode(&x); err != nil {
		return nil, fmt.Errorf("reading catalog index: %w", err)
	}
	return &x, nil
}

// Package is what a resolver needs of one package of a catalog.
type Package struct {
	Name           string
	DefaultChannel string
	Channels       []Channel
	Bundles        []Bundle
	// Deprecations are the entries of the package's olm.deprecations blob.
	Deprecations []Deprecation

	// strict: blobs must name the package (ParsePackage); seen: its
	// olm.package blob was read.
	strict, seen bool
}

// Channel is an olm.channel blob.
type Channel struct {
	Name    string
	Entries []ChannelEntry
}

// ChannelEntry is one entry of a channel and its upgrade edges.
type ChannelEntry struct {
	Name      string   `json:"name"`
	Replaces  string   `json:"replaces,omitempty"`
	Skips     []string `json:"skips,omitempty"`
	SkipRange string   `json:"skipRange,omitempty"`
}

// Bundle is an olm.bundle blob, without the properties that only carry
// manifests or CSV metadata (olm.bundle.object, olm.csv.metadata): they are
// most of a catalog's bytes and a resolver has no use for them.
type Bundle struct {
	Name  string
	Image string
	// Version is the olm.package property's version.
	Version    string
	Properties []Property
}

// Property is one property of a bundle.
type Property struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// Deprecation is one entry of an olm.deprecations blob: Schema is
// olm.package (Name empty), olm.channel or olm.bundle.
type Deprecation struct {
	Schema  string
	Name    string
	Message string
}

// bulkyProperties are left out of Bundle.Properties.
var bulkyProperties = map[string]bool{"olm.bundle.object": true, "olm.csv.metadata": true}

// ReadPackage reads one package of the stored catalog document in dir,
// reading only that package's lines. It returns an error wrapping
// os.ErrNotExist when the catalog has no such package.
func ReadPackage(dir string, x *Index, name string) (*Package, error) {
	pi, ok := x.Package(name)
	if !ok {
		return nil, fmt.Errorf("package %q: %w", name, os.ErrNotExist)
	}
	f, err := os.Open(filepath.Join(dir, DocumentFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p := &Package{Name: pi.Name, DefaultChannel: pi.DefaultChannel}
	if err := p.readLines(io.NewSectionReader(f, pi.Offset, pi.Length), pi.Length); err != nil {
		return nil, fmt.Errorf("package %q of the stored catalog: %w", name, err)
	}
	return p, nil
}

// ErrPackageTooLarge is returned by ParsePackage for a document over its
// limit.
var ErrPackageTooLarge = errors.New("package document too large")

// ParsePackage reads one package's document as a catalog's content service
// serves it (the package's lines of a stored catalog document,
// <contentURL>packages/<name>.jsonl) from r, reading at most limit bytes:
// a longer document is an error wrapping ErrPackageTooLarge. Every blob
// must belong to package name.
func ParsePackage(r io.Reader, name string, limit int64) (*Package, error) {
	if limit <= 0 {
		limit = DefaultLimits.MaxTotalBytes
	}
	lr := &io.LimitedReader{R: r, N: limit + 1}
	p := &Package{Name: name, strict: true}
	err := p.readLines(lr, limit+1)
	if lr.N <= 0 {
		return nil, fmt.Errorf("package %q: %w: over %d bytes", name, ErrPackageTooLarge, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("package %q: %w", name, err)
	}
	if !p.seen {
		return nil, fmt.Errorf("package %q: the document has no olm.package blob", name)
	}
	return p, nil
}

// readLines adds every line of r, at most size bytes, to p.
func (p *Package) readLines(r io.Reader, size int64) error {
	sc := bufio.NewScanner(r)
	// Lines were written within the blob limit in force then; allow the
	// largest a document can hold.
	sc.Buffer(make([]byte, 0, 64<<10), int(min(size+1, DefaultLimits.MaxBlobBytes*4)))
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		if err := p.add(sc.Bytes()); err != nil {
			return err
		}
	}
	return sc.Err()
}

func (p *Package) add(line []byte) error {
	var m struct {
		Schema     string          `json:"schema"`
		Name       string          `json:"name"`
		Package    string          `json:"package"`
		Default    string          `json:"defaultChannel"`
		Image      string          `json:"image"`
		Entries    json.RawMessage `json:"entries"`
		Properties []Property      `json:"properties"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return err
	}
	if p.strict {
		switch {
		case m.Schema == SchemaPackage && m.Name != p.Name:
			return fmt.Errorf("an olm.package blob names package %q", m.Name)
		case m.Schema == SchemaPackage:
			p.seen, p.DefaultChannel = true, m.Default
		case (m.Schema == SchemaChannel || m.Schema == SchemaBundle || m.Schema == SchemaDeprecations) && m.Package != p.Name:
			return fmt.Errorf("an %s blob belongs to package %q", m.Schema, m.Package)
		}
	}
	switch m.Schema {
	case SchemaChannel:
		c := Channel{Name: m.Name}
		if err := json.Unmarshal(m.Entries, &c.Entries); err != nil {
			return err
		}
		p.Channels = append(p.Channels, c)
	case SchemaBundle:
		b := Bundle{Name: m.Name, Image: m.Image}
		for _, prop := range m.Properties {
			if bulkyProperties[prop.Type] {
				continue
			}
			if prop.Type == SchemaPackage {
				var v struct {
					Version string `json:"version"`
				}
				if err := json.Unmarshal(prop.Value, &v); err != nil {
					return err
				}
				b.Version = v.Version
			}
			b.Properties = append(b.Properties, prop)
		}
		p.Bundles = append(p.Bundles, b)
	case SchemaDeprecations:
		var entries []struct {
			Reference struct {
				Schema string `json:"schema"`
				Name   string `json:"name"`
			} `json:"reference"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(m.Entries, &entries); err != nil {
			return err
		}
		for _, e := range entries {
			p.Deprecations = append(p.Deprecations, Deprecation{Schema: e.Reference.Schema, Name: e.Reference.Name, Message: e.Message})
		}
	case "":
		return errors.New("a line has no schema")
	}
	return nil
}
