// Package liststream reads lists from the API server one item at a time:
// the response is requested as JSON and streamed, each item is handed over
// as its JSON and dropped before the next is read, and an item larger than
// a bound fails before it is buffered whole. Lists of objects that users
// create (custom resources, RoleBindings) are as large as those users make
// them; a page of whole objects decoded at once is not bounded in bytes.
package liststream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/rukpak-dev/rukpak/internal/leanclient"
)

// MaxObjectBytes is the API server's limit on a request: no stored
// object's JSON is larger (etcd's own default limit is ~1.5 MiB).
const MaxObjectBytes = 3 << 20

// Client requests pages of lists as JSON.
type Client struct {
	REST rest.Interface
	// lean, when set, reads single objects (Object).
	lean *leanclient.Client
}

// New returns a Client for cfg's API server, through httpClient (nil: a
// new one for cfg).
func New(cfg *rest.Config, httpClient *http.Client) (*Client, error) {
	if httpClient == nil {
		var err error
		if httpClient, err = rest.HTTPClientFor(cfg); err != nil {
			return nil, fmt.Errorf("creating an HTTP client for lists: %w", err)
		}
	}
	cfg = rest.CopyConfig(cfg)
	cfg.APIPath = "/apis"
	cfg.AcceptContentTypes = "application/json"
	cfg.ContentType = "application/json"
	// Only to decode the API server's errors.
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	c, err := rest.UnversionedRESTClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating a REST client for lists: %w", err)
	}
	lean, err := leanclient.New(nil, cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return &Client{REST: c, lean: lean}, nil
}

// Page requests one page (Limit, Continue, LabelSelector) of the list at
// path (e.g. "/apis/example.com/v1/widgets") and returns its body, unread.
func (c *Client) Page(ctx context.Context, path string, opts metav1.ListOptions) (io.ReadCloser, error) {
	req := c.REST.Get().AbsPath(path).
		SetHeader("Accept", "application/json").
		Param("limit", strconv.FormatInt(opts.Limit, 10))
	if opts.Continue != "" {
		req = req.Param("continue", opts.Continue)
	}
	if opts.LabelSelector != "" {
		req = req.Param("labelSelector", opts.LabelSelector)
	}
	return req.Stream(ctx)
}

// Object reads the object named name of resource (in namespace, "" for a
// cluster-scoped one) as JSON, at most maxBytes of it (a larger one is a
// TooLargeError). Namespace and name must be path segments.
func (c *Client) Object(ctx context.Context, resource schema.GroupVersionResource, namespace, name string, maxBytes int64) ([]byte, error) {
	return c.AppendObject(ctx, nil, resource, namespace, name, maxBytes)
}

// AppendObject is Object appending to dst, so that a caller reading
// objects one after another reads them into one buffer: io.ReadAll grows a
// new one from 512 bytes for each, about twice the object allocated.
func (c *Client) AppendObject(ctx context.Context, dst []byte, resource schema.GroupVersionResource, namespace, name string, maxBytes int64) ([]byte, error) {
	if err := leanclient.CheckName(name); err != nil {
		return dst, err
	}
	p := "/apis/" + resource.Group + "/" + resource.Version
	if resource.Group == "" {
		p = "/api/" + resource.Version
	}
	if namespace != "" {
		if err := leanclient.CheckName(namespace); err != nil {
			return dst, fmt.Errorf("namespace: %w", err)
		}
		p += "/namespaces/" + leanclient.PathSegment(namespace)
	}
	p += "/" + resource.Resource + "/" + leanclient.PathSegment(name)
	var body io.ReadCloser
	var err error
	if c.lean != nil {
		// A lean request: the health of installed objects reads a few
		// per install.
		body, err = c.lean.Open(ctx, p, resource.GroupResource(), name)
	} else {
		body, err = c.REST.Get().AbsPath(p).SetHeader("Accept", "application/json").Stream(ctx)
	}
	if err != nil {
		return dst, err
	}
	defer func() { _ = body.Close() }()
	start := len(dst)
	raw, err := appendAll(dst, io.LimitReader(body, maxBytes+1))
	if err != nil {
		return raw[:start], err
	}
	if int64(len(raw)-start) > maxBytes {
		return raw[:start], &TooLargeError{Name: ObjectName(raw[start:]), Limit: maxBytes}
	}
	return raw, nil
}

// appendAll is io.ReadAll appending to dst.
func appendAll(dst []byte, r io.Reader) ([]byte, error) {
	if cap(dst) == 0 {
		dst = make([]byte, 0, 512)
	}
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// All reads every page of the list at path, limit items per page, calling
// each with every item's JSON (at most maxItem bytes) in turn.
func (c *Client) All(ctx context.Context, path string, limit, maxItem int64, each func(raw []byte) error) error {
	return c.Selected(ctx, path, "", limit, maxItem, each)
}

// Selected is All of the items matching the label selector selector ("":
// every item).
func (c *Client) Selected(ctx context.Context, path, selector string, limit, maxItem int64, each func(raw []byte) error) error {
	cont := ""
	for {
		body, err := c.Page(ctx, path, metav1.ListOptions{Limit: limit, Continue: cont, LabelSelector: selector})
		if err != nil {
			return err
		}
		cont, err = Items(ctx, body, maxItem, each)
		_ = body.Close()
		if err != nil || cont == "" {
			return err
		}
	}
}

// TooLargeError is an item over the bound.
type TooLargeError struct {
	// Name is the item's "namespace/name" (or "" if it is not among its
	// first 64 KiB).
	Name string
	// Size is the item's size, 0 when it was not read whole.
	Size, Limit int64
}

func (e *TooLargeError) Error() string {
	name := e.Name
	if name == "" {
		name = "(name not found)"
	}
	if e.Size == 0 {
		return fmt.Sprintf("object %s is larger than the limit of %d bytes", name, e.Limit)
	}
	return fmt.Sprintf("object %s is %d bytes, more than the limit of %d", name, e.Size, e.Limit)
}

// errTooLarge stops the read of an item larger than the bound before it is
// buffered whole.
var errTooLarge = errors.New("item too large")

// slack is what the stream may read past an item's end: the list's
// punctuation and the next key.
const slack = 4 << 10

// Items reads one list response, calling each with every item's JSON, one
// at a time (each must not keep it), and returns the list's continue
// token. An item larger than maxItem fails with a *TooLargeError; an error
// from each stops the read and is returned.
func Items(ctx context.Context, body io.Reader, maxItem int64, each func(raw []byte) error) (string, error) {
	r := &cappedReader{r: body}
	dec := json.NewDecoder(r)
	// Whatever comes next (a key, an item, the list's metadata) may be up
	// to an item's size: never buffer more.
	bound := func() { r.limit = dec.InputOffset() + maxItem + slack }
	bound()
	if err := expectDelim(dec, '{'); err != nil {
		return "", readErr(err, dec, maxItem)
	}
	cont := ""
	for dec.More() {
		bound()
		tok, err := dec.Token()
		if err != nil {
			return "", readErr(err, dec, maxItem)
		}
		switch tok {
		case "items":
			if err := expectDelim(dec, '['); err != nil {
				return "", readErr(err, dec, maxItem)
			}
			// One buffer for every item (RawMessage's decode appends to
			// it from its start): each does not keep what it is given.
			var raw json.RawMessage
			for dec.More() {
				if err := ctx.Err(); err != nil {
					return "", err
				}
				bound()
				if err := dec.Decode(&raw); err != nil {
					return "", readErr(err, dec, maxItem)
				}
				if int64(len(raw)) > maxItem {
					return "", &TooLargeError{Name: ObjectName(raw), Size: int64(len(raw)), Limit: maxItem}
				}
				if err := each(raw); err != nil {
					return "", err
				}
			}
			if err := expectDelim(dec, ']'); err != nil {
				return "", readErr(err, dec, maxItem)
			}
		case "metadata":
			var meta metav1.ListMeta
			if err := dec.Decode(&meta); err != nil {
				return "", readErr(err, dec, maxItem)
			}
			cont = meta.Continue
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return "", readErr(err, dec, maxItem)
			}
		}
	}
	return cont, nil
}

// readErr names what stopped the stream.
func readErr(err error, dec *json.Decoder, maxItem int64) error {
	if errors.Is(err, errTooLarge) {
		// The item's beginning is still buffered: its name is near it.
		prefix, _ := io.ReadAll(io.LimitReader(dec.Buffered(), 64<<10))
		return &TooLargeError{Name: ObjectName(prefix), Limit: maxItem}
	}
	return fmt.Errorf("reading the list: %w", err)
}

func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("got %v, want %v", tok, d)
	}
	return nil
}

// ObjectName returns "namespace/name" (or "name") from the beginning of an
// object's JSON (the API server writes metadata before spec), or "".
func ObjectName(prefix []byte) string {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	var ns, name, key string
	depth, inMeta, expectKey := 0, false, false
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
				expectKey = depth > 0
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
