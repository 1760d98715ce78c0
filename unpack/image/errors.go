package image

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/rukpak-dev/rukpak/unpack"
)

// classify wraps a registry error with the image reference and marks the
// failures retrying cannot fix as terminal: a bad reference, denied
// credentials, an unknown tag or digest, an untrusted certificate, content
// over a limit. Network errors, timeouts and 5xx stay retryable. (A
// registry's error answer is cut to unpack.Excerpt as it arrives, see
// limitedTransport.)
func (u *Unpacker) classify(ctx context.Context, ref string, err error) error {
	if err == nil {
		return nil
	}
	if unpack.IsTerminal(err) {
		return unpack.Terminal(fmt.Errorf("image %q: %w", ref, err))
	}
	if errors.Is(err, context.DeadlineExceeded) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("pulling image %q: not done within the fetch timeout of %s: %w", ref, u.cfg.Limits.FetchTimeout, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("pulling image %q: %w", ref, err)
	}
	var (
		badName     *name.ErrBadName
		verifyErr   *tls.CertificateVerificationError
		unknownAuth x509.UnknownAuthorityError
		hostErr     x509.HostnameError
		invalidErr  x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &badName):
		return unpack.Terminal(fmt.Errorf("invalid image reference %q: %w", ref, err))
	case errors.As(err, &verifyErr), errors.As(err, &unknownAuth), errors.As(err, &hostErr), errors.As(err, &invalidErr):
		return unpack.Terminal(fmt.Errorf("pulling image %q: registry certificate is not trusted (set certificateData to its CA): %w", ref, err))
	}
	var terr *transport.Error
	if errors.As(err, &terr) {
		switch code := terr.StatusCode; {
		case code == http.StatusUnauthorized || code == http.StatusForbidden:
			return unpack.Terminal(fmt.Errorf("pulling image %q: access denied (check the pull secret): %w", ref, err))
		case code == http.StatusNotFound:
			return unpack.Terminal(fmt.Errorf("image %q not found: %w", ref, err))
		case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests:
		case code >= 400 && code < 500:
			return unpack.Terminal(fmt.Errorf("pulling image %q: %w", ref, err))
		}
	}
	return fmt.Errorf("pulling image %q: %w", ref, err)
}
