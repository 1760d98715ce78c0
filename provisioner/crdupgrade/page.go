package crdupgrade

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// minObjectBytes is the object size a page's length is computed with when
// every object seen so far was smaller: pages of small objects are at most
// PageSize long anyway.
const minObjectBytes = 1 << 10

// listSlack is what the stream may read past an object's end: the list's
// punctuation and the next key.
const listSlack = 4 << 10

// run reads the objects of p.listVersion page by page, one object at a
// time, and judges each.
func (p *pass) run(ctx context.Context, l Lister, old *apiextensionsv1.CustomResourceDefinition, opts Options) error {
	gvr := schema.GroupVersionResource{Group: old.Spec.Group, Version: p.listVersion, Resource: old.Spec.Names.Plural}
	s := &stream{opts: opts, budget: opts.budget()}
	cont := ""
	for {
		limit := min(max(opts.pageBytes()/max(s.largest, minObjectBytes), 1), opts.pageSize())
		if s.largest == 0 {
			// Nothing read yet: the objects may all be of the largest size.
			limit = min(max(opts.pageBytes()/opts.maxObjectBytes(), 1), opts.pageSize())
		}
		body, err := l.ListJSON(ctx, gvr, metav1.ListOptions{Limit: limit, Continue: cont})
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return err
		}
		cont, err = s.page(ctx, body, func(u *unstructured.Unstructured) { p.judge(ctx, u, opts) })
		_ = body.Close()
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return err
		}
		if cont == "" {
			return nil
		}
	}
}

// stream decodes the pages of one pass.
type stream struct {
	opts   Options
	budget *Budget
	// largest is the largest object read so far, total all bytes read.
	largest, total int64
	last           string // the last object read, for messages
}

// errTooLarge stops the read of an object larger than MaxObjectBytes
// before it is buffered whole.
var errTooLarge = errors.New("object too large")

// page reads one list response, decoding its items one at a time into
// each (which must not keep them), and returns its continue token.
func (s *stream) page(ctx context.Context, body io.Reader, each func(*unstructured.Unstructured)) (string, error) {
	maxObject := s.opts.maxObjectBytes()
	r := &cappedReader{r: body}
	dec := json.NewDecoder(r)
	// Whatever comes next (a key, an object, the list's metadata) may be
	// up to an object's size: never buffer more.
	bound := func() { r.limit = dec.InputOffset() + maxObject + listSlack }
	bound()
	if err := expectDelim(dec, '{'); err != nil {
		return "", err
	}
	cont := ""
	for dec.More() {
		bound()
		tok, err := dec.Token()
		if err != nil {
			return "", s.readErr(err, dec)
		}
		switch tok {
		case "items":
			if err := expectDelim(dec, '['); err != nil {
				return "", s.readErr(err, dec)
			}
			for dec.More() {
				if err := ctx.Err(); err != nil {
					return "", err
				}
				bound()
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					return "", s.readErr(err, dec)
				}
				if err := s.object(ctx, raw, each); err != nil {
					return "", err
				}
			}
			if err := expectDelim(dec, ']'); err != nil {
				return "", s.readErr(err, dec)
			}
		case "metadata":
			var meta metav1.ListMeta
			if err := dec.Decode(&meta); err != nil {
				return "", s.readErr(err, dec)
			}
			cont = meta.Continue
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return "", s.readErr(err, dec)
			}
		}
	}
	return cont, nil
}

// object decodes and judges one object within the budgets.
func (s *stream) object(ctx context.Context, raw []byte, each func(*unstructured.Unstructured)) error {
	size := int64(len(raw))
	if size > s.opts.maxObjectBytes() {
		return s.tooLarge(raw, fmt.Sprintf("is %s", formatBytes(size)))
	}
	s.total += size
	if s.total > s.opts.maxBytes() {
		return &BudgetError{Exceeded: fmt.Sprintf("read so far take %s", formatBytes(s.total)), Limit: s.opts.maxBytes(), Flag: FlagMaxBytes}
	}
	s.largest = max(s.largest, size)
	c := cost(raw)
	if c > s.budget.size {
		return &BudgetError{Object: objectName(raw), Exceeded: fmt.Sprintf("(%s) would take about %s to decode and validate", formatBytes(size), formatBytes(c)),
			Limit: s.budget.size, Flag: FlagMemoryBytes}
	}
	if err := s.budget.sem.Acquire(ctx, c); err != nil {
		return err
	}
	defer s.budget.sem.Release(c)
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(raw, &u.Object); err != nil {
		return fmt.Errorf("decoding object %s: %w", objectName(raw), err)
	}
	s.last = objectName(raw)
	each(u)
	return nil
}

// readErr names what stopped the stream.
func (s *stream) readErr(err error, dec *json.Decoder) error {
	if errors.Is(err, errTooLarge) {
		// The object's beginning is still buffered: its name is near it.
		prefix, _ := io.ReadAll(io.LimitReader(dec.Buffered(), 64<<10))
		return s.tooLarge(prefix, "")
	}
	return fmt.Errorf("reading the list: %w", err)
}

func (s *stream) tooLarge(prefix []byte, exceeded string) error {
	name := objectName(prefix)
	switch {
	case name == "" && s.last != "":
		name = "after " + s.last
	case name == "":
		name = "(name not found)"
	}
	return &BudgetError{Object: name, Exceeded: exceeded, Limit: s.opts.maxObjectBytes(), Flag: FlagMaxObjectBytes}
}

// objectName returns "namespace/name" from the beginning of an object's
// JSON (the API server writes metadata before spec), or "".
func objectName(prefix []byte) string {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	var ns, name string
	depth, inMeta := 0, false
	key := ""
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				depth++
				if depth == 2 {
					inMeta = key == "metadata"
				}
				expectKey = true
			case '[':
				depth++
			case '}', ']':
				depth--
				if inMeta && depth == 1 {
					return join(ns, name)
				}
				expectKey = depth > 0 // after a nested value, in an object's keys (or a list: harmless)
			}
			continue
		case string:
			if expectKey {
				key = t
				expectKey = false
				continue
			}
			if inMeta && depth == 2 {
				switch key {
				case "name":
					name = t
				case "namespace":
					ns = t
				}
			}
		}
		expectKey = true
	}
	return join(ns, name)
}

func join(ns, name string) string {
	if name == "" || ns == "" {
		return name
	}
	return ns + "/" + name
}

func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("reading the list: got %v, want %v", tok, d)
	}
	return nil
}

// cappedReader fails a read past limit, so a decoder never buffers more
// than one bounded value.
type cappedReader struct {
	r           io.Reader
	read, limit int64
}

func (c *cappedReader) Read(b []byte) (int, error) {
	if c.read >= c.limit {
		return 0, errTooLarge
	}
	if int64(len(b)) > c.limit-c.read {
		b = b[:c.limit-c.read]
	}
	n, err := c.r.Read(b)
	c.read += int64(n)
	return n, err
}
