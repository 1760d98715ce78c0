package plain

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/rukpak-dev/rukpak/internal/freelist"
	"github.com/rukpak-dev/rukpak/internal/jsonmap"
)

// Decode returns the objects held by one manifest file: a stream of YAML
// documents or JSON values. Empty documents are skipped and `kind: List`
// objects are flattened into their items. name is only used in errors, which
// also give the zero-based document index. It decodes within DefaultLimits.
func Decode(name string, data []byte) ([]*unstructured.Unstructured, error) {
	return DefaultLimits.Decode(name, bytes.NewReader(data))
}

// Decode is the package's Decode within l, reading the file from r as it
// goes: no more than one document is held as text at a time.
func (l Limits) Decode(name string, r io.Reader) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	err := l.OrDefault().decode(name, r, new(atomic.Int64), func(obj *unstructured.Unstructured) error {
		objs = append(objs, obj)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return objs, nil
}

// readers are the decoders' read buffers: a bundle of 1,000 small files
// allocated 64 MiB of them per decode (three times what decoding the
// files cost) before they were reused.
var readers = freelist.New(4, func() *bufio.Reader { return bufio.NewReaderSize(nil, 64<<10) })

// docBuffers are the splitters' document buffers, which grew anew for
// every file decoded (twice its largest document), and then to each
// file's size after most garbage collections, as a sync.Pool (a fleet's
// CRD files are hundreds of kilobytes each): two are kept (freelist),
// grown to the largest file they read. One over maxPooledDocBuffer is
// left to the collector rather than kept.
var docBuffers = freelist.New(2, func() *[]byte { b := make([]byte, 0, 64<<10); return &b })

const maxPooledDocBuffer = 1 << 20

// decode streams the documents of one file, checks each against l before
// converting it, and hands every object to visit. total counts the nodes
// of every document of the bundle. l must be OrDefault'ed.
func (l Limits) decode(name string, r io.Reader, total *atomic.Int64, visit func(*unstructured.Unstructured) error) error {
	br := readers.Get()
	br.Reset(&limitedReader{r: r, n: l.MaxFileBytes})
	defer func() {
		br.Reset(nil)
		readers.Put(br)
	}()
	// A file is JSON or YAML by its first bytes, as apimachinery's
	// YAMLOrJSONDecoder decides.
	head, _ := br.Peek(4096)
	jsonFile := utilyaml.IsJSONBuffer(head)
	bp := docBuffers.Get()
	s := splitter{r: br, max: l.MaxDocumentBytes, buf: (*bp)[:0]}
	if f, ok := r.(fs.File); ok {
		// Grown once to the file's size (a document's at most) rather
		// than doubled up to it.
		if info, err := f.Stat(); err == nil && info.Size() > int64(cap(s.buf)) {
			s.buf = slices.Grow(s.buf, int(min(info.Size(), l.MaxDocumentBytes)+1))
		}
	}
	defer func() {
		if cap(s.buf) <= maxPooledDocBuffer {
			*bp = s.buf[:0]
			docBuffers.Put(bp)
		}
	}()
	doc := 0
	for {
		text, err := s.next()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case errors.Is(err, errDocumentTooLarge):
			return l.documentTooLarge(name, doc)
		case errors.Is(err, errFileTooLarge):
			return l.fileTooLarge(name)
		case err != nil:
			return fmt.Errorf("decode %s: document %d: %w", name, doc, err)
		}
		// Estimated as the decoder will read it: only a document that is
		// one valid JSON value is decoded as JSON alone. Any other text of
		// a JSON file (a YAML document after a "---" line, or YAML flow
		// style that starts like JSON) reaches a decoder that falls back
		// to YAML, aliases and all.
		oneJSON := jsonFile && json.Valid(bytes.TrimSpace(text))
		check := l.check
		if oneJSON {
			check = l.checkJSON
		}
		cost, err := check(text)
		if err != nil {
			return fmt.Errorf("decode %s: document %d %w", name, doc, err)
		}
		if total.Add(int64(cost)) > int64(l.MaxTotalNodes) {
			return l.tooManyNodes()
		}
		n, err := decodeText(text, jsonFile, oneJSON, cost, doc, func(doc int, fields map[string]any) error {
			// The scan's depth is an estimate; the decoded values' is
			// exact, and what the limit holds to.
			if jsonmap.Nesting(fields, l.MaxDepth) > l.MaxDepth {
				return l.nestedTooDeep(name, doc)
			}
			return decodeFields(name, doc, fields, visit)
		})
		doc += n
		if err != nil {
			var de *documentError
			if errors.As(err, &de) {
				return fmt.Errorf("decode %s: document %d: %w", name, de.doc, de.err)
			}
			return err
		}
	}
}

// The limits' messages, shared with CheckEncoded.

func (l Limits) fileTooLarge(name string) error {
	return fmt.Errorf("decode %s: file is larger than %s", name, formatBytes(l.MaxFileBytes))
}

func (l Limits) filesTooLarge() error {
	return fmt.Errorf("the files of %s/ are larger than %s together", ManifestsDir, formatBytes(l.MaxTotalBytes))
}

func (l Limits) documentTooLarge(name string, doc int) error {
	return fmt.Errorf("decode %s: document %d is larger than %s", name, doc, formatBytes(l.MaxDocumentBytes))
}

func (l Limits) tooManyNodes() error {
	return fmt.Errorf("the files of %s/ hold more than %d YAML nodes together", ManifestsDir, l.MaxTotalNodes)
}

func (l Limits) nestedTooDeep(name string, doc int) error {
	return fmt.Errorf("decode %s: document %d is nested more than %d levels deep", name, doc, l.MaxDepth)
}

// documentError is a conversion error of one document.
type documentError struct {
	doc int
	err error
}

func (e *documentError) Error() string { return e.err.Error() }

// decodeText decodes the values of one document's text (one YAML
// document, or in a JSON file a stream of JSON values), holding cost nodes
// of the process's decoding budget meanwhile. It returns how many values it
// read. The conversions are apimachinery's YAMLOrJSONDecoder's followed by
// util/json's; oneJSON says the text is exactly one valid JSON value,
// decoded as it is. A value that is not an object (nor empty) is an error.
func decodeText(text []byte, jsonFile, oneJSON bool, cost int, first int, each func(doc int, fields map[string]any) error) (int, error) {
	w := weight(cost, text)
	if err := decoding.Acquire(context.Background(), w); err != nil {
		return 0, err
	}
	defer decoding.Release(w)
	if !jsonFile {
		// What YAMLToJSONDecoder and util/json make of a document, without
		// a decoder (and its buffers) per document, nor the JSON between.
		fields, err := jsonmap.FromYAML(text)
		if err != nil {
			return 0, &documentError{first, err}
		}
		return 1, each(first, fields)
	}
	// One JSON value, as a file of one object is (converted registry+v1
	// content): decoded as it is, without a stream decoder, its buffer
	// and a copy of the value.
	if oneJSON {
		fields, err := jsonmap.Unmarshal(bytes.TrimSpace(text))
		if err != nil {
			return 0, &documentError{first, err}
		}
		return 1, each(first, fields)
	}
	reader := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(text), 4096)
	for n := 0; ; n++ {
		var raw json.RawMessage
		if err := reader.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, &documentError{first + n, err}
		}
		var fields map[string]any
		if len(raw) > 0 { // not an empty document
			var err error
			if fields, err = jsonmap.Unmarshal(raw); err != nil {
				return n, &documentError{first + n, err}
			}
		}
		if err := each(first+n, fields); err != nil {
			return n, err
		}
	}
}

// decodeFields turns one document's fields into objects for visit.
func decodeFields(name string, doc int, fields map[string]any, visit func(*unstructured.Unstructured) error) error {
	if len(fields) == 0 {
		return nil // an empty document
	}
	obj := &unstructured.Unstructured{Object: fields}
	if obj.IsList() {
		items, err := listItems(obj)
		if err != nil {
			return fmt.Errorf("decode %s: document %d: %w", name, doc, err)
		}
		for i, item := range items {
			if err := checkObject(item); err != nil {
				return fmt.Errorf("decode %s: document %d: item %d: %w", name, doc, i, err)
			}
		}
		for _, item := range items {
			if err := visit(item); err != nil {
				return err
			}
		}
		return nil
	}
	if err := checkObject(obj); err != nil {
		return fmt.Errorf("decode %s: document %d: %w", name, doc, err)
	}
	return visit(obj)
}

func listItems(list *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	raw, ok := list.Object["items"]
	if !ok || raw == nil {
		return nil, nil
	}
	items, ok := raw.([]interface{})
	if !ok {
		return nil, fmt.Errorf("%s items must be a list, not %T", list.GetKind(), raw)
	}
	objs := make([]*unstructured.Unstructured, 0, len(items))
	for i, item := range items {
		m, ok := item.(map[string]interface{})
		if !ok {
			return nil, fmt.Errorf("item %d must be an object, not %T", i, item)
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs, nil
}

// checkObject rejects documents that cannot be applied, so a bundle fails at
// unpack time rather than at install time.
func checkObject(obj *unstructured.Unstructured) error {
	var missing []string
	if obj.GetAPIVersion() == "" {
		missing = append(missing, "apiVersion")
	}
	if obj.GetKind() == "" {
		missing = append(missing, "kind")
	}
	if obj.GetName() == "" {
		missing = append(missing, "metadata.name")
	}
	if len(missing) > 0 {
		return fmt.Errorf("object is missing required fields: %s", strings.Join(missing, ", "))
	}
	return nil
}

var (
	errDocumentTooLarge = errors.New("document too large")
	errFileTooLarge     = errors.New("file too large")
)

// limitedReader fails with errFileTooLarge once more than n bytes are read,
// rather than ending the file early as io.LimitReader would.
type limitedReader struct {
	r io.Reader
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n < 0 {
		return 0, errFileTooLarge
	}
	if int64(len(p)) > l.n+1 {
		p = p[:l.n+1]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	if l.n < 0 {
		return n, errFileTooLarge
	}
	return n, err
}

// splitter cuts a manifest file into documents at "---" lines, exactly as
// apimachinery's YAMLReader does (same separators, line endings normalised
// to "\n"), but never holds more than max bytes: a longer document is an
// error as soon as its text passes max, however long its lines.
type splitter struct {
	r   *bufio.Reader
	max int64
	buf []byte
	eof bool
}

// next returns the next non-empty document's text, which is valid until the
// following call, or io.EOF.
func (s *splitter) next() ([]byte, error) {
	s.buf = s.buf[:0]
	for !s.eof {
		start := len(s.buf)
		for {
			frag, err := s.r.ReadSlice('\n')
			s.buf = append(s.buf, frag...)
			// A line ending adds at most one byte ("\n" after a last line).
			if int64(len(s.buf)) > s.max+1 {
				return nil, errDocumentTooLarge
			}
			if err == nil {
				break
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if errors.Is(err, io.EOF) {
				s.eof = true
				break
			}
			return nil, err
		}
		line := s.buf[start:]
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if s.eof && len(line) == 0 && len(s.buf) == start {
			break
		}
		s.buf = append(s.buf[:start+len(line)], '\n')
		if int64(len(s.buf)) > s.max {
			return nil, errDocumentTooLarge
		}
		if bytes.HasPrefix(line, []byte(separator)) {
			rest := strings.TrimSpace(string(line[len(separator):]))
			if len(rest) > 0 && rest[0] != '#' {
				return nil, fmt.Errorf("invalid Yaml document separator: %s", rest)
			}
			s.buf = s.buf[:start]
			if len(s.buf) > 0 {
				return s.buf, nil
			}
		}
	}
	if len(s.buf) > 0 {
		return s.buf, nil
	}
	return nil, io.EOF
}

const separator = "---"
