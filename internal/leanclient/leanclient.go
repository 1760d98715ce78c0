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
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
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

	http      *http.Client
	base      *url.URL
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
const acceptMetadata = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

// New wraps c, whose requests go through hc made from cfg
// (rest.HTTPClientFor of it, or of a config with the same host): c's
// RESTMapper maps the kinds.
func New(c client.Client, cfg *rest.Config, hc *http.Client) (*Client, error) {
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("the API server's URL: %w", err)
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = rest.DefaultKubernetesUserAgent()
	}
	return &Client{Client: c, http: hc, base: base, userAgent: ua}, nil
}

// Get reads the metadata of key's object into a PartialObjectMetadata
// whose kind is set; other objects, and calls with options, are the
// wrapped client's.
func (c *Client) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok || len(opts) > 0 {
		return c.Client.Get(ctx, key, obj, opts...)
	}
	u, gr, err := c.objectURL(m.GroupVersionKind(), key.Namespace, key.Name)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodGet, u.String(), "", nil, m, gr, key.Name)
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
	u, gr, err := c.objectURL(m.GroupVersionKind(), m.Namespace, m.Name)
	if err != nil {
		return err
	}
	q := url.Values{}
	if po.FieldManager != "" {
		q.Set("fieldManager", po.FieldManager)
	}
	if po.Force != nil {
		q.Set("force", strconv.FormatBool(*po.Force))
	}
	if po.FieldValidation != "" {
		q.Set("fieldValidation", po.FieldValidation)
	}
	u.RawQuery = q.Encode()
	return c.do(ctx, http.MethodPatch, u.String(), string(patch.Type()), data, m, gr, m.Name)
}

// objectURL is the URL of an object of kind gvk, mapped by the client's
// RESTMapper, with its group and resource (for errors).
func (c *Client) objectURL(gvk schema.GroupVersionKind, namespace, name string) (*url.URL, schema.GroupResource, error) {
	mapping, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, schema.GroupResource{}, err
	}
	gr := mapping.Resource.GroupResource()
	// As client-go's request builder: a name or namespace that is not a
	// path segment is never sent.
	if name == "" {
		return nil, gr, errors.New("resource name may not be empty")
	}
	if msgs := content.IsPathSegmentName(name); len(msgs) > 0 {
		return nil, gr, fmt.Errorf("invalid resource name %q: %v", name, msgs)
	}
	var b strings.Builder
	b.WriteString(strings.TrimSuffix(c.base.Path, "/"))
	if mapping.Resource.Group == "" {
		b.WriteString("/api/")
	} else {
		b.WriteString("/apis/")
		b.WriteString(mapping.Resource.Group)
		b.WriteByte('/')
	}
	b.WriteString(mapping.Resource.Version)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if namespace == "" {
			return nil, gr, errors.New("namespace may not be empty for a namespaced resource")
		}
		if msgs := content.IsPathSegmentName(namespace); len(msgs) > 0 {
			return nil, gr, fmt.Errorf("invalid namespace %q: %v", namespace, msgs)
		}
		b.WriteString("/namespaces/")
		b.WriteString(namespace)
	}
	b.WriteByte('/')
	b.WriteString(mapping.Resource.Resource)
	b.WriteByte('/')
	b.WriteString(name)
	u := *c.base
	u.Path = b.String()
	u.RawPath = ""
	return &u, gr, nil
}

// do sends the request, retrying as client-go does, and decodes the
// answer into m (keeping m's kind) or returns the API server's error.
func (c *Client) do(ctx context.Context, method, target, contentType string, body []byte, m *metav1.PartialObjectMetadata, gr schema.GroupResource, name string) error {
	gvk := m.GroupVersionKind()
	for attempt := 0; ; attempt++ {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, target, rd)
		if err != nil {
			return err
		}
		req.Header = http.Header{"Accept": {acceptMetadata}, "User-Agent": {c.userAgent}}
		if contentType != "" {
			req.Header["Content-Type"] = []string{contentType}
		}
		resp, err := c.http.Do(req)
		if err != nil {
			metrics.RequestResult.Increment(ctx, "<error>", method, req.URL.Host)
			if method == http.MethodGet && attempt < maxRetries && ctx.Err() == nil &&
				(utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err)) {
				if werr := sleep(ctx, time.Second); werr != nil {
					return err
				}
				continue
			}
			return err
		}
		metrics.RequestResult.Increment(ctx, strconv.Itoa(resp.StatusCode), method, req.URL.Host)
		buf := buffers.Get().(*bytes.Buffer)
		buf.Reset()
		_, rerr := buf.ReadFrom(io.LimitReader(resp.Body, maxAnswer+1))
		_ = resp.Body.Close()
		if wait, ok := retryAfter(resp); ok && attempt < maxRetries {
			putBuffer(buf)
			if err := sleep(ctx, wait); err != nil {
				return err
			}
			continue
		}
		err = answer(resp, buf.Bytes(), rerr, m, method, gr, name)
		putBuffer(buf)
		m.SetGroupVersionKind(gvk)
		return err
	}
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

// answer decodes a successful answer into m, or makes the error of a
// failed one.
func answer(resp *http.Response, data []byte, readErr error, m *metav1.PartialObjectMetadata, method string, gr schema.GroupResource, name string) error {
	if readErr != nil {
		return fmt.Errorf("reading the API server's answer: %w", readErr)
	}
	if len(data) > maxAnswer {
		return fmt.Errorf("the API server answered with more than %d bytes", maxAnswer)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		*m = metav1.PartialObjectMetadata{}
		if _, _, err := codecs.UniversalDeserializer().Decode(data, nil, m); err != nil {
			return fmt.Errorf("decoding the API server's answer: %w", err)
		}
		return nil
	}
	status := &metav1.Status{}
	if _, _, err := codecs.UniversalDeserializer().Decode(data, nil, status); err == nil && status.Status == metav1.StatusFailure {
		return &apierrors.StatusError{ErrStatus: *status}
	}
	retry := 0
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		retry = s
	}
	msg := strings.TrimSpace(string(data[:min(len(data), 1024)]))
	return apierrors.NewGenericServerResponse(resp.StatusCode, method, gr, name, msg, retry, true)
}

// codecs decode metadata and statuses, in protobuf or JSON.
var codecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	if err := metav1.AddMetaToScheme(s); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(s)
}()

// buffers hold answers while they are decoded.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// keptBuffer is the largest buffer kept for another answer.
const keptBuffer = 64 << 10

func putBuffer(b *bytes.Buffer) {
	if b.Cap() <= keptBuffer {
		buffers.Put(b)
	}
}
