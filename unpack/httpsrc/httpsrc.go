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
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/archive"
)

// DefaultTimeout bounds one download, so a stalled server cannot hold a
// reconcile forever.
const DefaultTimeout = 10 * time.Minute

// Unpacker unpacks http sources.
type Unpacker struct {
	cfg unpack.Config
	// Timeout bounds one download; DefaultTimeout when zero.
	Timeout time.Duration
}

var _ unpack.Unpacker = (*Unpacker)(nil)

// New returns an http Unpacker.
func New(cfg unpack.Config) *Unpacker {
	cfg.Limits = cfg.Limits.OrDefault()
	return &Unpacker{cfg: cfg}
}

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

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	if err != nil {
		return nil, unpack.Terminal(fmt.Errorf("GET %s: %w", shown, err))
	}
	if name := src.Auth.SecretName(); name != "" {
		user, pass, err := u.basicAuth(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("GET %s: %w", shown, err)
		}
		req.SetBasicAuth(user, pass)
	}

	resp, err := u.client(src.Auth.SkipVerify()).Do(req)
	if err != nil {
		return nil, classify(shown, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err := fmt.Errorf("GET %s: unexpected status %s", shown, resp.Status)
		if permanent(resp.StatusCode) {
			return nil, unpack.Terminal(err)
		}
		return nil, err
	}

	tree, sum, err := u.extract(ctx, bundle.Name, resp.Body)
	if err != nil {
		if errors.Is(err, archive.ErrNotGzip) {
			return nil, unpack.Terminal(fmt.Errorf("GET %s: response body is not a gzip-compressed tar archive", shown))
		}
		return nil, fmt.Errorf("GET %s: %w", shown, err)
	}
	res := unpack.Unpacked(tree.FS(), bundle.Spec.Source.DeepCopy(), tree.Discard)
	res.Message = fmt.Sprintf("archive sha256:%x", sum)
	return res, nil
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
	err = archive.Extract(ctx, r, tree, archive.Options{RequireGzip: true})
	if err == nil {
		// Hash the whole archive, gzip trailer and padding included; the
		// padding is bounded so a server cannot stream forever.
		_, err = io.CopyN(io.Discard, r, 1<<20)
		if errors.Is(err, io.EOF) {
			err = nil
		} else if err == nil {
			err = unpack.Terminal(errors.New("more than 1 MiB of data after the end of the archive"))
		}
	}
	if err != nil {
		_ = tree.Discard()
		return nil, nil, err
	}
	return tree, h.Sum(nil), nil
}

func (u *Unpacker) client(insecure bool) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// The user asked for it explicitly, for test servers.
	t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure} //nolint:gosec
	timeout := u.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	return &http.Client{Transport: t, Timeout: timeout}
}

// basicAuth reads username and password from the named Secret. A missing
// Secret is retryable (it may be created next); missing keys are not.
func (u *Unpacker) basicAuth(ctx context.Context, name string) (string, string, error) {
	key := types.NamespacedName{Namespace: u.cfg.Namespace, Name: name}
	var secret corev1.Secret
	if err := u.cfg.Reader.Get(ctx, key, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return "", "", fmt.Errorf("auth secret %q not found in namespace %q", name, u.cfg.Namespace)
		}
		return "", "", fmt.Errorf("reading auth secret %s: %w", key, err)
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

// classify marks certificate failures terminal; other transport errors
// (refused connections, timeouts) are retryable.
func classify(shown string, err error) error {
	var (
		verifyErr   *tls.CertificateVerificationError
		unknownAuth x509.UnknownAuthorityError
		hostErr     x509.HostnameError
	)
	if errors.As(err, &verifyErr) || errors.As(err, &unknownAuth) || errors.As(err, &hostErr) {
		return unpack.Terminal(fmt.Errorf("GET %s: server certificate is not trusted (or set auth.insecureSkipVerify): %w", shown, err))
	}
	return fmt.Errorf("GET %s: %w", shown, err)
}
