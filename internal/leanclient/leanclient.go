// Package leanclient makes the provisioner's most frequent requests, an
// object's metadata read and an object applied (answered with its
// metadata), without client-go's request builder. Installing a fleet of
// operators sends a few thousand of them, and through controller-runtime's
// client each cost ~18 KB allocated (the request's URL, parameters and
// headers built and copied several times, the answer read into a growing
// buffer and decoded through two envelopes): sent as plain HTTP requests on
// the same transport (TLS, credentials, impersonation, the leanmeta
// rewriting), ~7 KB.
//
// Everything else, and any call with options this package does not handle,
// goes to the wrapped client unchanged. The requests keep client-go's
// semantics where they matter: names checked as path segments, errors as
// API status errors (apierrors.IsNotFound and the rest work), a retry on
// the API server's Retry-After (throttling by priority and fairness) at
// most ten times, GETs retried on a dropped connection, and client-go's
// request metrics counted.
package leanclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/metrics"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Client is a client.Client whose metadata reads (Get into a
// PartialObjectMetadata, no options) and patches answered with metadata
// (Patch of a PartialObjectMetadata, with at most a field manager, force
// and field validation) are lean requests; everything else is the wrapped
// client's.
type Client struct {
	client.Client

	http *http.Client
	// prefix is the API server's URL without a trailing slash.
	prefix    string
	userAgent string
}

// maxAnswer bounds an answer read: metadata is kilobytes (an object's
// labels and annotations, at most 256 KiB of them, and managed fields),
// and an error's status less.
const maxAnswer = 4 << 20

// maxRetries is client-go's bound on the retries a Retry-After asks for.
const maxRetries = 10

// maxRetryWait bounds one wait a Retry-After asks for.
const maxRetryWait = 10 * time.Second

// acceptMetadata asks for the object's metadata, in protobuf (JSON from a
// server that has no protobuf, e.g. an aggregated API).
const acceptMetadata = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

// New wraps c, whose requests go through hc made from cfg
// (rest.HTTPClientFor of it, or of a config with the same host): c's
// RESTMapper maps the kinds. c may be nil for a client that only opens
// (Open) and writes (Write).
func New(c client.Client, cfg *rest.Config, hc *http.Client) (*Client, error) {
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("the API server's URL: %w", err)
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = rest.DefaultKubernetesUserAgent()
	}
	prefix := base.Scheme + "://" + base.Host + strings.TrimSuffix(base.EscapedPath(), "/")
	return &Client{Client: c, http: hc, prefix: prefix, userAgent: ua}, nil
}

// Get reads the metadata of key's object into a PartialObjectMetadata
// whose kind is set; other objects, and calls with options, are the
// wrapped client's.
func (c *Client) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok || len(opts) > 0 {
		return c.Client.Get(ctx, key, obj, opts...)
	}
	u, gr, err := c.objectURL(m.GroupVersionKind(), key.Namespace, key.Name, "")
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodGet, u, "", nil, m, gr, key.Name)
}

// Patch patches a PartialObjectMetadata's object and reads its metadata
// back into it; other objects, and options other than a field manager,
// force and field validation, are the wrapped client's.
func (c *Client) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return c.Client.Patch(ctx, obj, patch, opts...)
	}
	po := (&client.PatchOptions{}).ApplyOptions(opts)
	if len(po.DryRun) > 0 || po.Raw != nil {
		return c.Client.Patch(ctx, obj, patch, opts...)
	}
	data, err := patch.Data(obj)
	if err != nil {
		return err
	}
	// In url.Values.Encode's order.
	var q string
	if po.FieldManager != "" {
		q += "&fieldManager=" + url.QueryEscape(po.FieldManager)
	}
	if po.FieldValidation != "" {
		q += "&fieldValidation=" + url.QueryEscape(po.FieldValidation)
	}
	if po.Force != nil {
		q += "&force=" + strconv.FormatBool(*po.Force)
	}
	u, gr, err := c.objectURL(m.GroupVersionKind(), m.Namespace, m.Name, strings.TrimPrefix(q, "&"))
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPatch, u, string(patch.Type()), data, m, gr, m.Name)
}

// objectURL is the URL of an object of kind gvk, mapped by the client's
// RESTMapper, with query if not empty, and its group and resource (for
// errors).
func (c *Client) objectURL(gvk schema.GroupVersionKind, namespace, name, query string) (string, schema.GroupResource, error) {
	mapping, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return "", schema.GroupResource{}, err
	}
	gr := mapping.Resource.GroupResource()
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	if err := checkNames(namespaced, namespace, name); err != nil {
		return "", gr, err
	}
	res := mapping.Resource
	// Escaped as client-go's request builder does: '?' and '#' are valid
	// in a path segment name and must not start a query or fragment.
	name, namespace = url.PathEscape(name), url.PathEscape(namespace)
	// Written once at its length: a few of these per installed object.
	n := len(c.prefix) + len("/apis/") + len(res.Group) + 1 + len(res.Version) + 1 + len(res.Resource) + 1 + len(name) + 1 + len(query)
	if namespaced {
		n += len("/namespaces/") + len(namespace)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(c.prefix)
	if res.Group == "" {
		b.WriteString("/api/")
	} else {
		b.WriteString("/apis/")
		b.WriteString(res.Group)
		b.WriteByte('/')
	}
	b.WriteString(res.Version)
	if namespaced {
		b.WriteString("/namespaces/")
		b.WriteString(namespace)
	}
	b.WriteByte('/')
	b.WriteString(res.Resource)
	b.WriteByte('/')
	b.WriteString(name)
	if query != "" {
		b.WriteByte('?')
		b.WriteString(query)
	}
	return b.String(), gr, nil
}

// checkNames refuses, as client-go's request builder does, a name or
// namespace that is not a path segment: such a name is never sent.
func checkNames(namespaced bool, namespace, name string) error {
	if name == "" {
		return errors.New("resource name may not be empty")
	}
	if msgs := content.IsPathSegmentName(name); len(msgs) > 0 {
		return fmt.Errorf("invalid resource name %q: %v", name, msgs)
	}
	if !namespaced {
		return nil
	}
	if namespace == "" {
		return errors.New("namespace may not be empty for a namespaced resource")
	}
	if msgs := content.IsPathSegmentName(namespace); len(msgs) > 0 {
		return fmt.Errorf("invalid namespace %q: %v", namespace, msgs)
	}
	return nil
}

// do sends the request and decodes the answer into m (keeping m's kind)
// or returns the API server's error.
func (c *Client) do(ctx context.Context, method, target, contentType string, body []byte, m *metav1.PartialObjectMetadata, gr schema.GroupResource, name string) error {
	gvk := m.GroupVersionKind()
	resp, err := c.send(ctx, method, target, contentType, acceptMetadata, body)
	if err != nil {
		return err
	}
	buf := buffers.Get().(*bytes.Buffer)
	buf.Reset()
	_, rerr := buf.ReadFrom(io.LimitReader(resp.Body, maxAnswer+1))
	_ = resp.Body.Close()
	err = answer(resp, buf.Bytes(), rerr, m, method, gr, name)
	putBuffer(buf)
	m.SetGroupVersionKind(gvk)
	return err
}

// send sends a request, again as client-go would: when the API server asks
// to retry later (at most maxRetries times, each wait at most
// maxRetryWait), and for a GET when the connection dropped. The answer's
// body is the caller's to close.
func (c *Client) send(ctx context.Context, method, target, contentType, accept string, body []byte) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, target, rd)
		if err != nil {
			return nil, err
		}
		req.Header = http.Header{"Accept": {accept}, "User-Agent": {c.userAgent}}
		if contentType != "" {
			req.Header["Content-Type"] = []string{contentType}
		}
		resp, err := c.roundTrip(req)
		if err != nil {
			metrics.RequestResult.Increment(ctx, "<error>", method, req.URL.Host)
			if method == http.MethodGet && attempt < maxRetries && ctx.Err() == nil &&
				(utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err)) {
				if werr := sleep(ctx, time.Second); werr != nil {
					return nil, err
				}
				continue
			}
			return nil, err
		}
		metrics.RequestResult.Increment(ctx, strconv.Itoa(resp.StatusCode), method, req.URL.Host)
		if wait, ok := retryAfter(resp); ok && attempt < maxRetries {
			// Read to its end, so that the connection is reused.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
			_ = resp.Body.Close()
			if err := sleep(ctx, wait); err != nil {
				return nil, err
			}
			continue
		}
		return resp, nil
	}
}

// Open reads the object at absPath (under the API server's URL: the
// caller checks its names, e.g. with CheckName) as JSON, for a caller that
// reads it as it streams in; a failed answer is its error, as Get's.
func (c *Client) Open(ctx context.Context, absPath string, gr schema.GroupResource, name string) (io.ReadCloser, error) {
	resp, err := c.send(ctx, http.MethodGet, c.prefix+absPath, "", "application/json", nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp.Body, nil
	}
	defer resp.Body.Close() //nolint:errcheck // read to its end or bounded
	data, rerr := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	return nil, answer(resp, data, rerr, nil, http.MethodGet, gr, name)
}

// Write sends body (of contentType) to absPath (under the API server's
// URL: the caller checks its names, e.g. with CheckName) and reads the
// metadata of the object written into m (whose kind it keeps); a failed
// answer is its error, as Get's.
func (c *Client) Write(ctx context.Context, method, absPath, contentType string, body []byte, m *metav1.PartialObjectMetadata, gr schema.GroupResource, name string) error {
	return c.do(ctx, method, c.prefix+absPath, contentType, body, m, gr, name)
}

// ContentTypeProtobuf is the media type of Protobuf's encoding.
const ContentTypeProtobuf = "application/vnd.kubernetes.protobuf"

// sizedMessage is a protobuf-generated API type.
type sizedMessage interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// Protobuf encodes obj of apiVersion and kind as the API server reads
// protobuf (ContentTypeProtobuf): in one buffer of its size, where
// client-go's encoder copies the object once more into a growing one (a
// release record is tens of kilobytes).
func Protobuf(obj sizedMessage, apiVersion, kind string) ([]byte, error) {
	tm := runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}
	tmSize, rawSize := tm.Size(), obj.Size()
	n := len(protoMagic) + protowire.SizeTag(1) + protowire.SizeBytes(tmSize) + protowire.SizeTag(2) + protowire.SizeBytes(rawSize)
	b := make([]byte, 0, n)
	b = append(b, protoMagic...)
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(tmSize))
	b = b[:len(b)+tmSize]
	if _, err := tm.MarshalToSizedBuffer(b[len(b)-tmSize:]); err != nil {
		return nil, err
	}
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(rawSize))
	b = b[:len(b)+rawSize]
	if _, err := obj.MarshalToSizedBuffer(b[len(b)-rawSize:]); err != nil {
		return nil, err
	}
	return b, nil
}

// CheckName refuses a name that cannot be a path segment, as Get does.
func CheckName(name string) error { return checkNames(false, "", name) }

// PathSegment is name escaped for a URL path, as client-go writes it.
func PathSegment(name string) string { return url.PathEscape(name) }

// roundTrip sends req on the client's transport: its http.Client adds
// only redirects (the API server answers these requests without), a
// cookie jar and a timeout (none unless configured), and copied every
// request's headers and URL for them.
func (c *Client) roundTrip(req *http.Request) (*http.Response, error) {
	if c.http.Timeout != 0 || c.http.Jar != nil || c.http.Transport == nil {
		return c.http.Do(req)
	}
	return c.http.Transport.RoundTrip(req)
}

// retryAfter is the wait a throttled (429) or failed (5xx) answer asks for.
func retryAfter(resp *http.Response) (time.Duration, bool) {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500 {
		return 0, false
	}
	s, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || s < 0 {
		return 0, false
	}
	return min(time.Duration(s)*time.Second, maxRetryWait), true
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// answer decodes a successful answer into m (if not nil), or makes the
// error of a failed one.
func answer(resp *http.Response, data []byte, readErr error, m *metav1.PartialObjectMetadata, method string, gr schema.GroupResource, name string) error {
	if readErr != nil {
		return fmt.Errorf("reading the API server's answer: %w", readErr)
	}
	if len(data) > maxAnswer {
		return fmt.Errorf("the API server answered with more than %d bytes", maxAnswer)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if m == nil {
			return nil
		}
		*m = metav1.PartialObjectMetadata{}
		// Any object's metadata: a server (or proxy) that did not convert
		// the answer sends the whole object, whose field 1 is its metadata
		// as PartialObjectMetadata's is.
		if err := decode(data, "", m); err != nil {
			return fmt.Errorf("decoding the API server's answer: %w", err)
		}
		return nil
	}
	status := &metav1.Status{}
	if err := decode(data, "Status", status); err == nil && status.Status == metav1.StatusFailure {
		return &apierrors.StatusError{ErrStatus: *status}
	}
	retry := 0
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		retry = s
	}
	msg := strings.TrimSpace(string(data[:min(len(data), 1024)]))
	return apierrors.NewGenericServerResponse(resp.StatusCode, method, gr, name, msg, retry, true)
}

// protoMagic starts the API server's protobuf encoding, which wraps the
// object in a runtime.Unknown.
var protoMagic = []byte("k8s\x00")

// message is a protobuf-generated API type.
type message interface{ Unmarshal([]byte) error }

// decode decodes an answer of kind into into: protobuf read in place
// (runtime.Unknown's decoding copies the object's bytes first), or JSON.
func decode(data []byte, kind string, into message) error {
	rest, ok := bytes.CutPrefix(data, protoMagic)
	if !ok {
		return json.Unmarshal(data, into)
	}
	var raw []byte
	var gotKind string
	for len(rest) > 0 {
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 || typ != protowire.BytesType {
			return errors.New("not a runtime.Unknown")
		}
		rest = rest[n:]
		v, n := protowire.ConsumeBytes(rest)
		if n < 0 {
			return errors.New("not a runtime.Unknown")
		}
		rest = rest[n:]
		switch num {
		case 1: // typeMeta
			var tm runtime.TypeMeta
			if err := tm.Unmarshal(v); err != nil {
				return err
			}
			gotKind = tm.Kind
		case 2: // raw
			raw = v
		}
	}
	if kind != "" && gotKind != kind || kind == "" && (gotKind == "Status" || strings.HasSuffix(gotKind, "List")) {
		return fmt.Errorf("a %q, not a %q", gotKind, kind)
	}
	return into.Unmarshal(raw)
}

// buffers hold answers while they are decoded.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// keptBuffer is the largest buffer kept for another answer.
const keptBuffer = 64 << 10

func putBuffer(b *bytes.Buffer) {
	if b.Cap() <= keptBuffer {
		buffers.Put(b)
	}
}
