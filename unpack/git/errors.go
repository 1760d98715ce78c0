package git

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/rukpak-dev/rukpak/unpack"
)

// classify wraps a fetch error with the repository and marks the failures
// retrying cannot fix (missing repository, denied credentials, an untrusted
// server, a limit passed) as terminal. Everything else, network errors
// first, is retryable. Server-sent text in err (an ERR line, an ssh session's
// stderr line) is cut to a short, printable excerpt.
func classify(ctx context.Context, err error, repository string) error {
	var limit *limitError
	var slot *slotError
	switch {
	case err == nil:
		return nil
	case unpack.IsTerminal(err):
		return err
	case errors.As(err, &slot):
		return fmt.Errorf("fetching repository %q: %w", repository, slot)
	case ctx.Err() != nil:
		// Whatever the transport made of its closed connection, the
		// cause is the deadline or the cancellation.
		return fmt.Errorf("fetching repository %q: %w", repository, ctx.Err())
	case errors.As(err, &limit):
		return unpack.Terminal(fmt.Errorf("fetching repository %q: %w", repository, limit))
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return unpack.Terminal(fmt.Errorf("repository %q not found: %w", repository, excerpt(err)))
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return unpack.Terminal(fmt.Errorf("repository %q is empty: %w", repository, excerpt(err)))
	case errors.Is(err, transport.ErrAuthenticationRequired),
		errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod),
		strings.Contains(err.Error(), "ssh: unable to authenticate"):
		return unpack.Terminal(fmt.Errorf("access to repository %q denied: %w", repository, excerpt(err)))
	case isHostKeyError(err):
		return unpack.Terminal(fmt.Errorf("ssh host key of repository %q not trusted (check ssh-knownhosts): %w", repository, excerpt(err)))
	case isCertificateError(err):
		return unpack.Terminal(fmt.Errorf("TLS certificate of repository %q not trusted: %w", repository, excerpt(err)))
	}
	return fmt.Errorf("fetching repository %q: %w", repository, excerpt(err))
}

// sanitized is an error whose message is cut to unpack.Sanitize's excerpt;
// errors.Is and As still see the original.
type sanitized struct{ err error }

func (s *sanitized) Error() string { return unpack.Sanitize(s.err.Error()) }
func (s *sanitized) Unwrap() error { return s.err }

func excerpt(err error) error { return &sanitized{err: err} }

// redact hides a password embedded in a repository URL, since messages end
// up in Bundle status.
func redact(repository string) string {
	u, err := url.Parse(repository)
	if err != nil || u.User == nil {
		return repository
	}
	if _, ok := u.User.Password(); !ok {
		return repository
	}
	return u.Redacted()
}

func isHostKeyError(err error) bool {
	var keyErr *knownhosts.KeyError
	var revoked *knownhosts.RevokedError
	return errors.As(err, &keyErr) || errors.As(err, &revoked)
}

func isCertificateError(err error) bool {
	var unknownAuthority x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	var verification *tls.CertificateVerificationError
	return errors.As(err, &unknownAuthority) || errors.As(err, &invalid) ||
		errors.As(err, &hostname) || errors.As(err, &verification)
}
