package image

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/rukpak-dev/rukpak/unpack"
)

// maxMetadataBytes bounds one response that is not a blob (a manifest, an
// index, a token, an error page): go-containerregistry reads those whole
// into memory, manifests up to 100 MiB. The OCI distribution spec asks
// registries to accept manifests of 4 MiB; nothing a bundle needs is larger.
const maxMetadataBytes = 4 << 20

// fetchBudget is what one pull may still download, across every request
// it makes: manifests and compressed layers (the config is never fetched).
type fetchBudget struct {
	limit int64
	left  atomic.Int64
}

func newFetchBudget(limit int64) *fetchBudget {
	b := &fetchBudget{limit: limit}
	b.left.Store(limit)
	return b
}

func (b *fetchBudget) exceeded() error {
	return unpack.Terminal(fmt.Errorf("the image is larger than the fetch limit of %d bytes", b.limit))
}

// limitedTransport counts every response body against a pull's budget
// while it streams, and caps each response that is not a blob at
// maxMetadataBytes. The shared transport below it keeps its connections.
type limitedTransport struct {
	base   http.RoundTripper
	budget *fetchBudget
}

func (t *limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if resp.StatusCode >= 400 {
		// go-containerregistry puts up to 64 KiB of an error answer (an
		// error page, a /v2/ answer) in its message: keep only what the
		// distribution protocol defines (registryErrors).
		body := registryErrors(resp.Body)
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		return resp, nil
	}
	b := &limitedBody{rc: resp.Body, budget: t.budget, max: -1}
	if !isBlob(req) {
		b.max = maxMetadataBytes
		b.what = req.Method + " " + unpack.Shorten(req.URL.Path)
	}
	// A declared length fails up front, before anything is read; a HEAD
	// answer declares what a GET would send, and sends nothing.
	if req.Method == http.MethodHead {
		return resp, nil
	}
	if err := b.fits(resp.ContentLength); err != nil {
		_ = resp.Body.Close()
		return nil, err
	}
	resp.Body = b
	return resp, nil
}

// isBlob reports whether req fetches a blob, possibly through redirects
// (to a storage service whose paths say nothing).
func isBlob(req *http.Request) bool {
	for r := req; r != nil; {
		if strings.Contains(r.URL.Path, "/blobs/") {
			return true
		}
		if r.Response == nil {
			break
		}
		r = r.Response.Request
	}
	return false
}

// limitedBody fails a read that takes a response past its cap (max, or
// none when negative) or the pull past its budget.
type limitedBody struct {
	rc     io.ReadCloser
	budget *fetchBudget
	max    int64
	what   string
	n      int64
}

// fits checks that n more bytes stay within the response's cap and the
// pull's budget.
func (b *limitedBody) fits(n int64) error {
	if b.max >= 0 && b.n+n > b.max {
		return unpack.Terminal(fmt.Errorf("the registry's response to %s is larger than the limit of %d bytes", b.what, b.max))
	}
	if n > b.budget.left.Load() {
		return b.budget.exceeded()
	}
	return nil
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		if ferr := b.fits(int64(n)); ferr != nil {
			return 0, ferr
		}
		b.n += int64(n)
		b.budget.left.Add(-int64(n))
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
