package image

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/rukpak-dev/rukpak/unpack"
)

// classify wraps a registry error with the image reference and marks the
// failures retrying cannot fix as terminal: a bad reference, denied
// credentials, an unknown tag or digest, an untrusted certificate, content
// over a limit. Network errors, timeouts and 5xx stay retryable. (A
// registry's error answer is cut to its status code and registryErrors as
// it arrives, see limitedTransport.)
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

// An error answer of a registry is the status code and, per the
// distribution spec, {"errors": [{"code", "message", "detail"}]}. The
// reference may name any endpoint the provisioner reaches, and its answer
// ends up in Bundle status, readable by every namespace viewer: only the
// envelope's codes and their messages, sanitised, are kept, never a body.
const (
	// maxErrorBody is as much of an error answer as go-containerregistry
	// reads.
	maxErrorBody = 64 << 10
	// maxRegistryErrors bounds the diagnostics kept of one answer.
	maxRegistryErrors = 4
)

// errorCode is what a distribution error code looks like
// (MANIFEST_UNKNOWN, DENIED, TOOMANYREQUESTS).
var errorCode = regexp.MustCompile(`^[A-Z][A-Z_]{0,63}$`)

// registryErrors reads an error answer's body (at most maxErrorBody) and
// returns the distribution error envelope it holds, reduced to codes and
// sanitised messages, or nothing when it holds none.
func registryErrors(r io.Reader) []byte {
	var in struct {
		Errors []struct {
			Code    any `json:"code"`
			Message any `json:"message"`
		} `json:"errors"`
	}
	if err := json.NewDecoder(io.LimitReader(r, maxErrorBody)).Decode(&in); err != nil {
		return nil
	}
	type diagnostic struct {
		Code    string `json:"code"`
		Message string `json:"message,omitempty"`
	}
	var out struct {
		Errors []diagnostic `json:"errors"`
	}
	for _, e := range in.Errors {
		code, ok := e.Code.(string)
		if !ok || !errorCode.MatchString(code) {
			continue
		}
		msg, _ := e.Message.(string)
		out.Errors = append(out.Errors, diagnostic{Code: code, Message: unpack.Sanitize(msg)})
		if len(out.Errors) == maxRegistryErrors {
			break
		}
	}
	if len(out.Errors) == 0 {
		return nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil
	}
	return b
}
