package storage

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
)

// ServiceAccountTokenPath is where a pod's projected service account token
// is mounted.
const ServiceAccountTokenPath = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// FallbackLoader loads a Bundle's content from Local and, when Local does
// not have it (another process unpacked the Bundle, or this one restarted
// with an empty volume), downloads it from status.contentURL.
type FallbackLoader struct {
	Local  Loader
	Client *http.Client
	// Token returns the bearer token to send; it is called for each
	// download so a rotated token file is picked up.
	Token func() (string, error)
	// Limits bound what a download may expand to (unset fields take
	// unpack.DefaultLimits).
	Limits unpack.Limits
}

// NewFallbackLoader loads from local first, then downloads with client
// (which must trust the content server's CA; see NewHTTPClient), sending
// the bearer token that token returns.
func NewFallbackLoader(local Loader, client *http.Client, token func() (string, error)) *FallbackLoader {
	return &FallbackLoader{Local: local, Client: client, Token: token}
}

var _ Loader = (*FallbackLoader)(nil)

// Load returns the local content, or the downloaded content when the local
// copy does not exist. Other local errors are returned as they are: a
// corrupt local file is a problem to report, not to paper over.
func (l *FallbackLoader) Load(ctx context.Context, bundle *rukpakv1alpha1.Bundle) (fs.FS, error) {
	if bundle == nil {
		return nil, errors.New("bundle is nil")
	}
	if l.Local != nil {
		fsys, err := l.Local.Load(ctx, bundle)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return fsys, err
		}
	}
	if bundle.Status.ContentURL == "" {
		return nil, fmt.Errorf("loading content of bundle %q: not stored locally and status.contentURL is empty", bundle.Name)
	}
	fsys, err := l.download(ctx, bundle.Status.ContentURL)
	if err != nil {
		return nil, fmt.Errorf("loading content of bundle %q from %s: %w", bundle.Name, bundle.Status.ContentURL, err)
	}
	return fsys, nil
}

func (l *FallbackLoader) download(ctx context.Context, url string) (fs.FS, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("building request: %w", err)
	}
	if l.Token != nil {
		token, err := l.Token()
		if err != nil {
			return nil, fmt.Errorf("getting bearer token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := l.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// A short excerpt of the body usually says why (forbidden for
		// which user, for instance).
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("server answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return ReadArchive(resp.Body, l.Limits)
}

// TokenFromFile returns a token source that reads path on every call, as
// projected service account tokens are rotated in place.
func TokenFromFile(path string) func() (string, error) {
	return func() (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("reading token: %w", err)
		}
		token := strings.TrimSpace(string(b))
		if token == "" {
			return "", fmt.Errorf("token file %s is empty", path)
		}
		return token, nil
	}
}

// NewHTTPClient returns a client that trusts the PEM certificates in caPEM
// in addition to the system roots.
func NewHTTPClient(caPEM []byte) (*http.Client, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if len(caPEM) > 0 && !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("CA data contains no PEM certificate")
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: transport}, nil
}
