package git

import (
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
// server) as terminal. Everything else, network errors first, is retryable.
func classify(err error, repository string) error {
	switch {
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return unpack.Terminal(fmt.Errorf("repository %q not found: %w", repository, err))
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return unpack.Terminal(fmt.Errorf("repository %q is empty: %w", repository, err))
	case errors.Is(err, transport.ErrAuthenticationRequired),
		errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod),
		strings.Contains(err.Error(), "ssh: unable to authenticate"):
		return unpack.Terminal(fmt.Errorf("access to repository %q denied: %w", repository, err))
	case isHostKeyError(err):
		return unpack.Terminal(fmt.Errorf("ssh host key of repository %q not trusted (check ssh-knownhosts): %w", repository, err))
	case isCertificateError(err):
		return unpack.Terminal(fmt.Errorf("TLS certificate of repository %q not trusted: %w", repository, err))
	}
	return fmt.Errorf("fetching repository %q: %w", repository, err)
}

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
