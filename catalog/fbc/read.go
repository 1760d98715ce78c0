package fbc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"

	"github.com/rukpak-dev/rukpak/internal/yamlcost"
	"sigs.k8s.io/yaml"
)

// ConfigsDir is where catalog images keep their blobs, by the convention
// of opm-built images (label operators.operatorframework.io.index.configs.v1).
// When a catalog's root holds it, only it is read.
const ConfigsDir = "configs"

// IgnoreFile holds .gitignore-style patterns of files a catalog directory
// does not load (the seed's .indexignore).
const IgnoreFile = ".indexignore"

// maxIgnoreFileBytes bounds one .indexignore file, read whole.
const maxIgnoreFileBytes = 64 << 10

// catalogFile reports whether name is a file read for blobs.
func catalogFile(name string) bool {
	switch path.Ext(name) {
	case ".json", ".yaml", ".yml":
		return true
	}
	return false
}

// root returns the directory of fsys the catalog is read from.
func root(fsys fs.FS) string {
	if fi, err := fs.Stat(fsys, ConfigsDir); err == nil && fi.IsDir() {
		return ConfigsDir
	}
	return "."
}

// walk calls each for every catalog file under dir in lexical order,
// skipping what .indexignore files exclude.
func walk(fsys fs.FS, dir string, each func(name string) error) error {
	var patterns []gitignore.Pattern
	return fs.WalkDir(fsys, dir, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := relTo(dir, name)
		if d.IsDir() {
			if rel != nil && gitignore.NewMatcher(patterns).Match(rel, true) {
				return fs.SkipDir
			}
			ps, err := readIgnore(fsys, name, rel)
			if err != nil {
				return err
			}
			patterns = append(patterns, ps...)
			return nil
		}
		if !d.Type().IsRegular() || d.Name() == IgnoreFile || !catalogFile(name) {
			return nil
		}
		if gitignore.NewMatcher(patterns).Match(rel, false) {
			return nil
		}
		return each(name)
	})
}

// relTo splits name, relative to dir, into its path elements (nil for dir
// itself).
func relTo(dir, name string) []string {
	if name == dir {
		return nil
	}
	if dir != "." {
		name = strings.TrimPrefix(name, dir+"/")
	}
	return strings.Split(name, "/")
}

// readIgnore reads the patterns of dir's .indexignore, if any. Patterns
// apply below the directory that holds them, as in git.
func readIgnore(fsys fs.FS, dir string, domain []string) ([]gitignore.Pattern, error) {
	f, err := fsys.Open(path.Join(dir, IgnoreFile))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxIgnoreFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path.Join(dir, IgnoreFile), err)
	}
	if len(data) > maxIgnoreFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path.Join(dir, IgnoreFile), maxIgnoreFileBytes)
	}
	var ps []gitignore.Pattern
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(line, domain))
	}
	return ps, nil
}

// blobReader cuts one file into blobs and turns each into one line of
// compact JSON, never holding more than one blob's text.
type blobReader struct {
	r    *bufio.Reader
	json bool
	l    Limits
	text []byte // the current blob's text
	out  bytes.Buffer
	eof  bool
}

var (
	errBlobTooLarge = errors.New("blob too large")
	errNotObject    = errors.New("is not a JSON object (every blob of a catalog is an object with a schema)")
)

// next returns the next blob as compact JSON (valid until the following
// call), or io.EOF.
func (b *blobReader) next() ([]byte, error) {
	for {
		var err error
		if b.json {
			err = b.nextJSON()
		} else {
			err = b.nextYAML()
		}
		if err != nil {
			if errors.Is(err, errBlobTooLarge) {
				return nil, fmt.Errorf("is larger than %d bytes", b.l.MaxBlobBytes)
			}
			return nil, err
		}
		if len(bytes.TrimSpace(b.text)) == 0 {
			continue // an empty YAML document
		}
		b.out.Reset()
		if b.json {
			if err := json.Compact(&b.out, b.text); err != nil {
				return nil, fmt.Errorf("is not valid JSON: %w", err)
			}
			return b.out.Bytes(), nil
		}
		if _, err := yamlcost.Check(b.text, b.l.MaxNodes, b.l.MaxDepth); err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(b.text)
		if err != nil {
			return nil, fmt.Errorf("is not valid YAML: %w", err)
		}
		js = bytes.TrimSpace(js)
		// The scan's depth is an estimate; the JSON's is exact.
		if _, err := yamlcost.CheckJSON(js, math.MaxInt, b.l.MaxDepth); err != nil {
			return nil, err
		}
		if len(js) == 0 || js[0] != '{' {
			if string(js) == "null" {
				continue // a document of only comments
			}
			return nil, errNotObject
		}
		return js, nil
	}
}

// nextJSON reads one JSON value into b.text, tracking nesting so that size
// and depth are refused before anything decodes it.
func (b *blobReader) nextJSON() error {
	b.text = b.text[:0]
	depth, inString, escaped := 0, false, false
	for {
		c, err := b.r.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if len(b.text) == 0 {
					return io.EOF
				}
				return errors.New("ends in the middle of a JSON value")
			}
			return err
		}
		if len(b.text) == 0 {
			switch c {
			case ' ', '\t', '\r', '\n':
				continue
			case '{':
			default:
				return errNotObject
			}
		}
		if int64(len(b.text)) >= b.l.MaxBlobBytes {
			return errBlobTooLarge
		}
		b.text = append(b.text, c)
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > b.l.MaxDepth {
				return fmt.Errorf("is nested more than %d levels deep", b.l.MaxDepth)
			}
		case c == '}' || c == ']':
			if depth--; depth == 0 {
				return nil
			}
		}
	}
}

// nextYAML reads one YAML document (up to a "---" line) into b.text.
func (b *blobReader) nextYAML() error {
	b.text = b.text[:0]
	if b.eof {
		return io.EOF
	}
	for {
		start := len(b.text)
		for {
			frag, err := b.r.ReadSlice('\n')
			b.text = append(b.text, frag...)
			if int64(len(b.text)) > b.l.MaxBlobBytes+int64(len("---\n")) {
				return errBlobTooLarge
			}
			if err == nil {
				break
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if errors.Is(err, io.EOF) {
				b.eof = true
				break
			}
			return err
		}
		line := bytes.TrimRight(b.text[start:], "\r\n")
		if bytes.HasPrefix(line, []byte("---")) && (len(line) == 3 || line[3] == ' ' || line[3] == '\t') {
			b.text = b.text[:start]
			if len(bytes.TrimSpace(b.text)) > 0 {
				return nil
			}
			b.text = b.text[:0]
		}
		if int64(len(b.text)) > b.l.MaxBlobBytes {
			return errBlobTooLarge
		}
		if b.eof {
			if len(b.text) == 0 {
				return io.EOF
			}
			return nil
		}
	}
}
