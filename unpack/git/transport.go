package git

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/pktline"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"golang.org/x/crypto/ssh"

	"github.com/rukpak-dev/rukpak/unpack"
)

// session is the part of go-git's transport.UploadPackSession a fetch uses.
// http(s) sessions are go-git's, with a client of our own; ssh and git://
// sessions are streamSessions over connections this package dials, because
// go-git's own dial neither takes a context nor can be interrupted (an ssh
// server that accepts and never answers hung the handshake forever).
type session interface {
	AdvertisedReferencesContext(ctx context.Context) (*packp.AdvRefs, error)
	UploadPack(ctx context.Context, req *packp.UploadPackRequest) (*packp.UploadPackResponse, error)
	Close() error
}

// maxAdvertisementBytes bounds what a server may send before the pack: the
// ref advertisement, shallow lines and acknowledgements are decoded into
// memory (about three times their size), so they get a budget of their own
// far below the pack's. 16 MiB is some 250,000 refs.
const maxAdvertisementBytes = 16 << 20

// wire counts the bytes one fetch reads from the network, on every
// transport, and fails the read that passes the budget.
type wire struct {
	read  atomic.Int64
	limit atomic.Int64
	// failed is the limit error, kept: ssh reads the connection on its
	// own goroutine and reports a failed read as a closed channel.
	failed atomic.Pointer[limitError]
	// pack is set once the pack itself streams, for the message.
	pack     atomic.Bool
	maxFetch int64
	// ctx is the fetch's, for waiting on a slot (fetching); held says the
	// fetch has one, taken once the advertisement is large.
	ctx  context.Context
	held atomic.Bool
	// waited is why taking a slot failed, kept: the transport reports
	// only its closed connection.
	waited atomic.Pointer[slotError]
}

// slotError is a fetch whose deadline came while it waited for a slot.
type slotError struct{ err error }

func (e *slotError) Error() string {
	return fmt.Sprintf("waiting for one of the %d git fetches with a ref advertisement over %d KiB that run at once to finish: %v", maxGitFetches, largeAdvertisementBytes>>10, e.err)
}
func (e *slotError) Unwrap() error { return e.err }

func newWire(ctx context.Context, maxFetch int64) *wire {
	w := &wire{maxFetch: maxFetch, ctx: ctx}
	w.limit.Store(min(maxAdvertisementBytes, maxFetch))
	return w
}

// release gives back the fetch's slot, if it took one.
func (w *wire) release() {
	if w.held.CompareAndSwap(true, false) {
		fetching.Release(1)
	}
}

// slot takes one of the process's slots for fetches with a large
// advertisement, waiting for it within the fetch's deadline.
func (w *wire) slot() error {
	if !w.held.CompareAndSwap(false, true) {
		return nil
	}
	if err := fetching.Acquire(w.ctx, 1); err != nil {
		w.held.Store(false)
		serr := &slotError{err: err}
		w.waited.CompareAndSwap(nil, serr)
		return serr
	}
	return nil
}

// startPack gives the pack its own budget of MaxFetchBytes.
func (w *wire) startPack() {
	w.pack.Store(true)
	w.limit.Store(w.read.Load() + w.maxFetch)
}

func (w *wire) count(n int) error {
	read := w.read.Add(int64(n))
	if read > largeAdvertisementBytes && !w.pack.Load() && !w.held.Load() {
		if err := w.slot(); err != nil {
			return err
		}
	}
	if read <= w.limit.Load() {
		return nil
	}
	err := &limitError{msg: fmt.Sprintf("the server's ref advertisement exceeds the limit of %d bytes", w.limit.Load())}
	if w.pack.Load() {
		err = &limitError{msg: fmt.Sprintf("download exceeds the limit of %d bytes (--max-fetch-bytes)", w.maxFetch)}
	}
	w.failed.CompareAndSwap(nil, err)
	return w.failed.Load()
}

// failure is the limit error once the budget is spent, whatever error the
// transport made of it.
func (w *wire) failure(err error) error {
	if f := w.failed.Load(); f != nil && err != nil {
		return f
	}
	if s := w.waited.Load(); s != nil && err != nil {
		return s
	}
	return err
}

// limitError is a limit a repository passed; retrying cannot help, so
// classify makes it terminal.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

func limitErrorf(format string, args ...any) error {
	return &limitError{msg: fmt.Sprintf(format, args...)}
}

// countedReader counts what it reads against a wire.
type countedReader struct {
	r    io.Reader
	wire *wire
}

func (c *countedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if cerr := c.wire.count(n); cerr != nil {
		return n, cerr
	}
	return n, err
}

// countedConn is a connection whose reads count against a wire.
type countedConn struct {
	net.Conn
	wire *wire
}

func (c *countedConn) Read(p []byte) (int, error) {
	return (&countedReader{r: c.Conn, wire: c.wire}).Read(p)
}

// countedBody is an http response body whose reads count against a wire.
type countedBody struct {
	countedReader
	io.Closer
}

// httpTransport counts response bodies against the fetch's wire and
// replaces error bodies by the status code: go-git reads an error body
// whole into its error message (a 256 MiB 404 body allocated 2.3 GiB), and
// the message ends up in the Bundle's status, where the answer of whatever
// endpoint the repository URL names is nobody's to read. (Git's own
// messages, ERR lines, come in successful answers.)
type httpTransport struct {
	base http.RoundTripper
	wire *wire
}

func (t *httpTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_ = resp.Body.Close()
		status := unpack.StatusText(resp.StatusCode)
		resp.Body = io.NopCloser(strings.NewReader(status))
		resp.ContentLength = int64(len(status))
		return resp, nil
	}
	resp.Body = &countedBody{countedReader: countedReader{r: resp.Body, wire: t.wire}, Closer: resp.Body}
	return resp, nil
}

// Shared HTTP transports, one per TLS setting, so connections are reused
// across fetches.
var (
	httpTransportsOnce sync.Once
	httpTransports     map[bool]*http.Transport
)

func baseHTTPTransport(insecure bool) *http.Transport {
	httpTransportsOnce.Do(func() {
		httpTransports = map[bool]*http.Transport{}
		for _, skip := range []bool{false, true} {
			httpTransports[skip] = &http.Transport{
				Proxy:                  http.ProxyFromEnvironment,
				DialContext:            (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
				ForceAttemptHTTP2:      true,
				MaxIdleConns:           32,
				IdleConnTimeout:        90 * time.Second,
				TLSHandshakeTimeout:    10 * time.Second,
				ExpectContinueTimeout:  time.Second,
				MaxResponseHeaderBytes: 1 << 20,
				// #nosec G402 -- only when the Bundle sets auth.insecureSkipVerify.
				TLSClientConfig: &tls.Config{InsecureSkipVerify: skip, MinVersion: tls.VersionTLS12},
			}
		}
	})
	return httpTransports[insecure]
}

// openSession connects to the repository at ep for one fetch: every read
// counts against w, and ctx (which carries the fetch deadline) interrupts
// the connection on every transport.
func openSession(ctx context.Context, ep *transport.Endpoint, a *access, w *wire) (session, error) {
	switch ep.Protocol {
	case "http", "https":
		client := &http.Client{Transport: &httpTransport{base: baseHTTPTransport(a.insecureSkipTLS), wire: w}}
		var auth transport.AuthMethod
		if a.basic != nil {
			auth = a.basic
		}
		s, err := githttp.NewClient(client).NewUploadPackSession(ep, auth)
		if err != nil {
			return nil, err
		}
		return s, nil
	case "ssh":
		return dialSSH(ctx, ep, a.ssh, w)
	case "git":
		return dialGit(ctx, ep, w)
	}
	return nil, fmt.Errorf("protocol %q is not supported", ep.Protocol)
}

// dial connects to addr and closes the connection as soon as ctx ends, which
// interrupts whatever is blocked on it. Reads count against w, if set.
func dial(ctx context.Context, addr string, w *wire) (net.Conn, func(), error) {
	conn, err := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	release := func() {
		stop()
		_ = conn.Close()
	}
	if w == nil {
		return conn, release, nil
	}
	return &countedConn{Conn: conn, wire: w}, release, nil
}

func dialSSH(ctx context.Context, ep *transport.Endpoint, cfg *ssh.ClientConfig, w *wire) (session, error) {
	if cfg == nil {
		return nil, errors.New("ssh needs credentials")
	}
	port := ep.Port
	if port <= 0 {
		port = 22
	}
	addr := net.JoinHostPort(ep.Host, strconv.Itoa(port))
	// The ssh library reads ahead of the session (up to its 2 MiB
	// window), so what counts is what the session reads, not the
	// connection.
	conn, release, err := dial(ctx, addr, nil)
	if err != nil {
		return nil, err
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		release()
		return nil, err
	}
	client := ssh.NewClient(c, chans, reqs)
	fail := func(err error) (session, error) {
		_ = client.Close()
		release()
		return nil, err
	}
	sess, err := client.NewSession()
	if err != nil {
		return fail(err)
	}
	stdin, err := sess.StdinPipe()
	if err != nil {
		return fail(err)
	}
	stdout, err := sess.StdoutPipe()
	if err != nil {
		return fail(err)
	}
	stderr, err := sess.StderrPipe()
	if err != nil {
		return fail(err)
	}
	if err := sess.Start(uploadPackCommand(ep.Path)); err != nil {
		return fail(err)
	}
	return &streamSession{
		stdin:  stdin,
		stdout: bufio.NewReader(&countedReader{r: stdout, wire: w}),
		stderr: firstLine(stderr),
		close: func() {
			_ = sess.Close()
			_ = client.Close()
			release()
		},
	}, nil
}

func dialGit(ctx context.Context, ep *transport.Endpoint, w *wire) (session, error) {
	port := ep.Port
	if port <= 0 {
		port = 9418
	}
	host := ep.Host
	if port != 9418 {
		host = net.JoinHostPort(ep.Host, strconv.Itoa(port))
	}
	conn, release, err := dial(ctx, net.JoinHostPort(ep.Host, strconv.Itoa(port)), w)
	if err != nil {
		return nil, err
	}
	req := packp.GitProtoRequest{RequestCommand: transport.UploadPackServiceName, Pathname: ep.Path, Host: host}
	if err := req.Encode(conn); err != nil {
		release()
		return nil, err
	}
	return &streamSession{stdin: nopWriteCloser{conn}, stdout: bufio.NewReader(conn), close: release}, nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// uploadPackCommand is the remote command for path, single-quoted for the
// remote shell as git does (sq_quote_buf).
func uploadPackCommand(path string) string {
	var b strings.Builder
	b.WriteString(transport.UploadPackServiceName + " '")
	for _, c := range []byte(path) {
		if c == '\'' || c == '!' {
			b.WriteString(`'\` + string(c) + `'`)
			continue
		}
		b.WriteByte(c)
	}
	b.WriteByte('\'')
	return b.String()
}

// firstLine returns a channel that receives the first meaningful line the
// server writes to stderr (at most unpack.MaxExcerpt bytes of it, sanitised)
// and is closed at the end of stderr; the rest is discarded unread into
// memory.
func firstLine(r io.Reader) <-chan string {
	ch := make(chan string, 1)
	go func() {
		defer close(ch)
		br := bufio.NewReaderSize(r, 4096)
		sent := false
		for !sent {
			line, err := br.ReadSlice('\n')
			text := strings.TrimSpace(string(line))
			// Skip blank lines and "remote:" banners, as go-git does.
			if strings.Trim(strings.TrimPrefix(text, "remote:"), "= ") != "" {
				ch <- unpack.Sanitize(text)
				sent = true
			}
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return
			}
		}
		_, _ = io.Copy(io.Discard, br)
	}()
	return ch
}

// streamSession speaks git's pack protocol (v0/v1, as go-git does) over a
// stream: an ssh session or a git:// connection.
type streamSession struct {
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr <-chan string // nil for git://
	close  func()
	once   sync.Once
}

func (s *streamSession) Close() error {
	s.once.Do(s.close)
	return nil
}

func (s *streamSession) AdvertisedReferencesContext(ctx context.Context) (*packp.AdvRefs, error) {
	ar := packp.NewAdvRefs()
	if err := ar.Decode(s.stdout); err != nil {
		return nil, s.advertisementError(ctx, err)
	}
	if ar.IsEmpty() {
		return nil, transport.ErrEmptyRemoteRepository
	}
	transport.FilterUnsupportedCapabilities(ar.Capabilities)
	return ar, nil
}

// advertisementError turns what a server sends instead of refs into an
// error: servers report a missing repository on stderr (ssh), in an ERR
// line, or as plain text (git daemon).
func (s *streamSession) advertisementError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var errLine *pktline.ErrorLine
	var unexpected *packp.ErrUnexpectedData
	switch {
	case errors.As(err, &errLine):
		if isRepoNotFound(errLine.Text) {
			return transport.ErrRepositoryNotFound
		}
		return fmt.Errorf("server error: %s", unpack.Sanitize(errLine.Text))
	case errors.Is(err, packp.ErrEmptyAdvRefs):
		return transport.ErrEmptyRemoteRepository
	case errors.As(err, &unexpected):
		if isRepoNotFound(string(unexpected.Data)) {
			return transport.ErrRepositoryNotFound
		}
		return fmt.Errorf("unexpected answer from the server: %s", unpack.Sanitize(string(unexpected.Data)))
	case errors.Is(err, packp.ErrEmptyInput) && s.stderr != nil:
		select {
		case line := <-s.stderr:
			if isRepoNotFound(line) {
				return transport.ErrRepositoryNotFound
			}
			if line != "" {
				return fmt.Errorf("server error: %s", line)
			}
		case <-time.After(5 * time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
		return io.ErrUnexpectedEOF
	}
	return err
}

func (s *streamSession) UploadPack(ctx context.Context, req *packp.UploadPackRequest) (*packp.UploadPackResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := req.UploadRequest.Encode(s.stdin); err != nil {
		return nil, fmt.Errorf("sending upload-request: %w", err)
	}
	if err := req.UploadHaves.Encode(s.stdin, true); err != nil {
		return nil, fmt.Errorf("sending haves: %w", err)
	}
	if err := pktline.NewEncoder(s.stdin).Encodef("done\n"); err != nil {
		return nil, fmt.Errorf("sending done: %w", err)
	}
	if err := s.stdin.Close(); err != nil {
		return nil, fmt.Errorf("closing input: %w", err)
	}
	res := packp.NewUploadPackResponse(req)
	if err := res.Decode(io.NopCloser(s.stdout)); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("decoding upload-pack response: %w", err)
	}
	return res, nil
}

// isRepoNotFound recognises the messages servers use for a missing (or
// hidden) repository.
func isRepoNotFound(s string) bool {
	for _, m := range []string{
		"Repository not found.",
		"repository does not exist.",
		"does not appear to be a git repository",
		"no such repository",
		"access denied",
		"Repository does not exist or you do not have access",
		"The project you were looking for could not be found",
	} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}
