// Package httpsrc unpacks Bundles whose source is a tar.gz archive served
// over HTTP(S).
//
// An HTTP URL is not content-addressed: the resolved source is the same
// source, so a re-unpack fetches the URL again and gets whatever it serves
// then. Use immutable URLs (ones that embed a version or digest) for
// content that must not change. The sha256 of the archive is reported in
// the Result's Message so a change can at least be noticed.
package httpsrc

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/archive"
)

// Unpacker unpacks http sources.
type Unpacker struct {
	cfg unpack.Config
}

var _ unpack.Unpacker = (*Unpacker)(nil)

// New returns an http Unpacker. Limits.FetchTimeout bounds one download,
// connection to last byte; Limits.MaxFetchBytes the bytes it may read.
func New(cfg unpack.Config) *Unpacker {
	cfg.Limits = cfg.Limits.OrDefault()
	return &Unpacker{cfg: cfg}
}

// maxRedirects is what net/http follows by default.
const maxRedirects = 10

// Unpack downloads and extracts the Bundle's archive into a fresh
// directory under BaseDir/http, removed by the Result's Close.
func (u *Unpacker) Unpack(ctx context.Context, bundle *rukpakv1alpha1.Bundle) (*unpack.Result, error) {
	src := bundle.Spec.Source.HTTP
	if bundle.Spec.Source.Type != rukpakv1alpha1.SourceTypeHTTP || src == nil {
		return nil, unpack.Terminal(fmt.Errorf("bundle %q has no http source", bundle.Name))
	}
	target, err := url.Parse(src.URL)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		return nil, unpack.Terminal(fmt.Errorf("invalid http source URL %q: want an absolute http or https URL", src.URL))
	}
	shown := target.Redacted()

	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, u.cfg.Limits.FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	if err != nil {
		return nil, unpack.Terminal(fmt.Errorf("GET %s: %w", shown, err))
	}
	if name := src.Auth.SecretName(); name != "" {
		user, pass, err := u.basicAuth(ctx, name, target.Host)
		if err != nil {
			return nil, fmt.Errorf("GET %s: %w", shown, err)
		}
		req.SetBasicAuth(user, pass)
	}

	t := transport(src.Auth.SkipVerify())
	defer t.CloseIdleConnections()
	resp, err := (&http.Client{Transport: t, CheckRedirect: keepCredentialsHome}).Do(req)
	if err != nil {
		return nil, u.classify(parent, shown, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// The status code only: the URL may be any endpoint the
		// provisioner reaches, and its body is nobody's to read (nor its
		// reason phrase: Go's text for the code is shown). Quoted, as
		// RukPak's message was.
		err := fmt.Errorf("GET %s: unexpected status %q", shown, unpack.StatusText(resp.StatusCode))
		if permanent(resp.StatusCode) {
			return nil, unpack.Terminal(err)
		}
		return nil, err
	}
	limit := u.cfg.Limits.MaxFetchBytes
	if resp.ContentLength > limit {
		return nil, unpack.Terminal(fmt.Errorf("GET %s: the response declares %d bytes, more than the fetch limit of %d", shown, resp.ContentLength, limit))
	}

	tree, sum, err := u.extract(ctx, bundle.Name, unpack.LimitReader(resp.Body, limit, tooLarge))
	if err != nil {
		if errors.Is(err, archive.ErrNotGzip) {
			// RukPak's words (gzip's own error), then what they mean.
			return nil, unpack.Terminal(fmt.Errorf("%w: the response body of GET %s is not a gzip-compressed tar archive", gzip.ErrHeader, shown))
		}
		return nil, u.classify(parent, shown, err)
	}
	res := unpack.Unpacked(tree.FS(), bundle.Spec.Source.DeepCopy(), tree.Discard)
	res.Message = fmt.Sprintf("archive sha256:%x", sum)
	return res, nil
}

// keepCredentialsHome follows a redirect, but sends the credentials only
// to the scheme and host (port included) they were given for: net/http
// keeps an Authorization header for the same host name on another port,
// for a subdomain, and from https to http.
func keepCredentialsHome(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	first := via[0].URL
	if req.URL.Scheme != first.Scheme || !strings.EqualFold(req.URL.Host, first.Host) {
		req.Header.Del("Authorization")
	}
	return nil
}

// tooLarge is the error of a response body past the fetch limit: an
// endless body costs at most the limit.
func tooLarge(limit int64) error {
	return unpack.Terminal(fmt.Errorf("the response is larger than the fetch limit of %d bytes", limit))
}

// extract writes the archive into a new tree and returns it with the
// sha256 of the archive bytes.
func (u *Unpacker) extract(ctx context.Context, bundleName string, body io.Reader) (*unpack.Tree, []byte, error) {
	tree, err := unpack.NewTempTree(filepath.Join(u.cfg.BaseDir, "http"), bundleName+"-", u.cfg.Limits)
	if err != nil {
		return nil, nil, err
	}
	h := sha256.New()
	r := io.TeeReader(body, h)
	// The whole archive is hashed, gzip trailer and padding included.
	if err := archive.ExtractWhole(ctx, r, tree, archive.Options{RequireGzip: true}); err != nil {
		_ = tree.Discard()
		return nil, nil, err
	}
	return tree, h.Sum(nil), nil
}

func transport(insecure bool) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// The user asked for it explicitly, for test servers.
	t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure} //nolint:gosec
	return t
}

// basicAuth reads username and password from the named Secret, if it is
// meant for host. A missing Secret is retryable (it may be created next);
// missing keys or another host are not.
func (u *Unpacker) basicAuth(ctx context.Context, name, host string) (string, string, error) {
	key := types.NamespacedName{Namespace: u.cfg.Namespace, Name: name}
	var secret corev1.Secret
	if err := u.cfg.Reader.Get(ctx, key, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return "", "", fmt.Errorf("auth secret %q not found in namespace %q", name, u.cfg.Namespace)
		}
		return "", "", fmt.Errorf("reading auth secret %s: %w", key, err)
	}
	if err := unpack.CheckSecretHost(&secret, host); err != nil {
		return "", "", err
	}
	user, okU := secret.Data["username"]
	pass, okP := secret.Data["password"]
	if !okU || !okP {
		return "", "", unpack.Terminal(fmt.Errorf("auth secret %s must have username and password keys", key))
	}
	return string(user), string(pass), nil
}

// permanent is a status retrying will not change: client errors, except
// timeouts and rate limiting.
func permanent(code int) bool {
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests
}

// classify marks certificate failures terminal and names a fetch that ran
// out of time; other transport errors (refused connections, resets) are
// retryable. parent is the caller's context, without the fetch timeout.
func (u *Unpacker) classify(parent context.Context, shown string, err error) error {
	var (
		verifyErr   *tls.CertificateVerificationError
		unknownAuth x509.UnknownAuthorityError
		hostErr     x509.HostnameError
	)
	switch {
	case errors.As(err, &verifyErr) || errors.As(err, &unknownAuth) || errors.As(err, &hostErr):
		return unpack.Terminal(fmt.Errorf("GET %s: server certificate is not trusted (or set auth.insecureSkipVerify): %w", shown, err))
	case errors.Is(err, context.DeadlineExceeded) && parent.Err() == nil:
		return fmt.Errorf("GET %s: not done within the fetch timeout of %s", shown, u.cfg.Limits.FetchTimeout)
	}
	return fmt.Errorf("GET %s: %w", shown, err)
}
