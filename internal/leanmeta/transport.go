package leanmeta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

const (
	// maxAnswer bounds an answer rewritten whole (an object or a list
	// page); a larger one is passed on: as it comes if its length is
	// known, else what was read of it first, then the rest.
	maxAnswer = 64 << 20
	// maxFrame bounds a watch event rewritten; a larger one is passed on
	// as it comes. An object in etcd is at most a few MiB.
	maxFrame = 16 << 20
	// keptBuffer is the largest buffer kept for the next answer or event:
	// a CRD's event can be megabytes, most are a few hundred bytes.
	keptBuffer = 256 << 10
)

// Config returns a copy of cfg whose clients' metadata-only answers come
// without managedFields.
func Config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = transport.Wrappers(cfg.WrapTransport, Wrap)
	return cfg
}

// Wrap returns a RoundTripper that drops managedFields from the
// metadata-only protobuf answers of rt: objects, lists and watch events.
// Wrapping twice is wrapping once.
func Wrap(rt http.RoundTripper) http.RoundTripper {
	if _, ok := rt.(*roundTripper); ok {
		return rt
	}
	return &roundTripper{next: rt}
}

// Wrapped says whether cfg's transport goes through Wrap.
func Wrapped(cfg *rest.Config) bool {
	if cfg == nil || cfg.WrapTransport == nil {
		return false
	}
	rt := cfg.WrapTransport(sentinel{})
	for rt != nil {
		if _, ok := rt.(*roundTripper); ok {
			return true
		}
		w, ok := rt.(interface{ WrappedRoundTripper() http.RoundTripper })
		if !ok {
			return false
		}
		rt = w.WrappedRoundTripper()
	}
	return false
}

// sentinel is the transport Wrapped wraps to look at the wrappers.
type sentinel struct{}

func (sentinel) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("leanmeta: not a transport")
}

type roundTripper struct{ next http.RoundTripper }

// WrappedRoundTripper lets client-go find the transport underneath.
func (t *roundTripper) WrappedRoundTripper() http.RoundTripper { return t.next }

func (t *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil || !strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadata") {
		return resp, err
	}
	media, params, perr := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if perr != nil || media != "application/vnd.kubernetes.protobuf" {
		return resp, nil
	}
	// A watch is known by its request: its answer is never read whole
	// here, whatever its Content-Type says.
	switch watch, stream := isWatch(req), params["stream"] == "watch"; {
	case watch && stream:
		resp.Body = &watchBody{body: resp.Body}
		return resp, nil
	case watch || stream:
		return resp, nil
	}
	return leanAnswer(resp), nil
}

// isWatch says whether req asks for a watch: ?watch=true (or 1), or the
// old /watch/ paths.
func isWatch(req *http.Request) bool {
	// The query parsed only when it may hold the parameter: parsing it
	// for every request cost more than the rest of this check.
	if strings.Contains(req.URL.RawQuery, "watch") {
		if w := req.URL.Query().Get("watch"); w == "true" || w == "1" {
			return true
		}
	}
	return strings.HasPrefix(req.URL.Path, "/api") && strings.Contains(req.URL.Path, "/watch/")
}

// buffers holds the read and write buffers of answers and events.
var buffers = sync.Pool{New: func() any { return new([]byte) }}

func getBuffer() *[]byte { return buffers.Get().(*[]byte) }

func putBuffer(b *[]byte) {
	if cap(*b) > keptBuffer {
		return
	}
	*b = (*b)[:0]
	buffers.Put(b)
}

// leanAnswer rewrites resp's body whole, if it is small enough.
func leanAnswer(resp *http.Response) *http.Response {
	if resp.ContentLength > maxAnswer {
		return resp
	}
	in := getBuffer()
	buf := bytes.NewBuffer((*in)[:0])
	if resp.ContentLength > 0 {
		buf.Grow(int(resp.ContentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(io.LimitReader(resp.Body, maxAnswer+1))
	*in = buf.Bytes()
	switch {
	case err != nil:
		// What was read, then the error, as client-go would have seen it.
		resp.Body = passedOn{Reader: io.MultiReader(bytes.NewReader(*in), errReader{err}), Closer: resp.Body}
		return resp
	case len(*in) > maxAnswer:
		resp.Body = passedOn{Reader: io.MultiReader(bytes.NewReader(*in), resp.Body), Closer: resp.Body}
		return resp
	}
	_ = resp.Body.Close()
	out := getBuffer()
	lean, ok := appendObject((*out)[:0], *in)
	if !ok {
		putBuffer(out)
		resp.Body = &bufferedBody{Reader: bytes.NewReader(*in), buf: in}
		return resp
	}
	putBuffer(in)
	*out = lean
	resp.Body = &bufferedBody{Reader: bytes.NewReader(lean), buf: out}
	resp.ContentLength = int64(len(lean))
	resp.Header.Del("Content-Length")
	return resp
}

// passedOn is an answer passed on as it came: what was read of it, then
// the rest (or the error reading it).
type passedOn struct {
	io.Reader
	io.Closer
}

// bufferedBody serves an answer read whole from a pooled buffer, given
// back on Close.
type bufferedBody struct {
	io.Reader
	mu  sync.Mutex
	buf *[]byte
}

func (b *bufferedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Reader.Read(p)
}

func (b *bufferedBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf != nil {
		b.Reader = eofReader{}
		putBuffer(b.buf)
		b.buf = nil
	}
	return nil
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// watchBody rewrites a protobuf watch stream event by event. Each event is
// a frame: its length as four bytes, big-endian, then a metav1.WatchEvent.
type watchBody struct {
	body    io.ReadCloser
	out     []byte // the current frame, rewritten
	pending []byte // what of it is still to be read
	raw     int64  // bytes of an oversized frame still to pass on
	err     error  // the body's error, once pending is read
}

func (w *watchBody) Read(p []byte) (int, error) {
	for len(w.pending) == 0 {
		switch {
		case w.raw > 0:
			n, err := w.body.Read(p[:min(int64(len(p)), w.raw)])
			w.raw -= int64(n)
			return n, err
		case w.err != nil:
			return 0, w.err
		}
		w.next()
	}
	n := copy(p, w.pending)
	w.pending = w.pending[n:]
	return n, nil
}

// next reads the next frame into pending: rewritten if it can be, else as
// it came. A frame over maxFrame is passed on as it is read.
func (w *watchBody) next() {
	if cap(w.out) > keptBuffer {
		w.out = nil
	}
	var header [4]byte
	n, err := io.ReadFull(w.body, header[:])
	if err != nil {
		w.out = append(w.out[:0], header[:n]...)
		w.pending, w.err = w.out, err
		return
	}
	size := binary.BigEndian.Uint32(header[:])
	w.out = append(w.out[:0], header[:]...)
	if size > maxFrame {
		w.pending, w.raw = w.out, int64(size)
		return
	}
	in := getBuffer()
	defer putBuffer(in)
	if *in, err = readFrame((*in)[:0], w.body, int(size)); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		w.out = append(w.out, *in...)
		w.pending, w.err = w.out, err
		return
	}
	if lean, ok := appendWatchEvent(w.out, *in); ok {
		binary.BigEndian.PutUint32(lean, uint32(len(lean)-len(header)))
		w.out = lean
	} else {
		w.out = append(w.out[:len(header)], *in...)
	}
	w.pending = w.out
}

// readFrame appends size bytes of r to buf, growing it as they arrive
// rather than at once to what a frame's header claims.
func readFrame(buf []byte, r io.Reader, size int) ([]byte, error) {
	for len(buf) < size {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(size-len(buf), max(cap(buf), 4<<10)))
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), size)])
		buf = buf[:len(buf)+n]
		if err != nil && len(buf) < size {
			return buf, err
		}
	}
	return buf, nil
}

// Close closes the stream. Its buffer is left to the collector: client-go
// stops a watch from another goroutine than the one reading it.
func (w *watchBody) Close() error { return w.body.Close() }
