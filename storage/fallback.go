package storage

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
)

// DefaultContentAudience is the audience of the tokens the content server
// accepts and the fallback loader sends. A token of the API server's own
// audience is neither sent nor accepted, so the content server (or anything
// posing as it) never holds a token that works against the API server.
const DefaultContentAudience = "content.core.rukpak.io"

// ContentTokenPath is where manifests/base/provisioner mounts the projected
// service account token of DefaultContentAudience.
const ContentTokenPath = "/var/run/secrets/rukpak/content/token"

// ServiceAccountTokenPath is where a pod's API server token is mounted. It
// is never sent to the content server.
const ServiceAccountTokenPath = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// FallbackLoader loads a Bundle's content from Local and, when Local does
// not have it (another process unpacked the Bundle, or this one restarted
// with an empty volume), downloads it from the provisioner's own content
// service.
//
// Nothing about the download comes from the Bundle's status, which anyone
// with bundles/status may write: the URL is BaseURL (configuration) plus the
// Bundle's name, the server must present a certificate Client trusts
// (configured CA), redirects are not followed, and the token sent is bound
// to the content audience. The downloaded bytes must then hash to
// status.contentDigest.
//
// Why a digest from status is enough: status is not a trust root, the
// channel is. Only a provisioner replica can answer at BaseURL with a
// trusted certificate, so the bytes are content some replica stored from
// the Bundle's spec (re-unpacks use status.resolvedSource only as a pin of
// the spec's own source, see unpack.FetchSource). The digest binds them to
// the one archive the unpacking reconciler stored and recorded: archives are
// byte-for-byte deterministic, so every healthy replica serves exactly those
// bytes, and a replica that serves anything else (tampered or torn storage,
// content unpacked from a different pin) is refused. A hostile status writer
// who changes the digest can only make loading fail, which they can already
// do by setting Unpacked=False; they cannot make bytes acceptable that the
// channel would not deliver.
type FallbackLoader struct {
	Local Loader
	// BaseURL is the content service, https://host[:port][/prefix]; the
	// content of Bundle N is <BaseURL>/bundles/N.tgz.
	BaseURL string
	// ClassBaseURLs overrides BaseURL for Bundles of provisioner classes
	// served by another content service (classes run in separate
	// processes).
	ClassBaseURLs map[string]string
	// Client must trust the content service's CA (see NewHTTPClient).
	// Redirects are never followed, whatever its CheckRedirect says.
	Client *http.Client
	// Token returns the bearer token to send; it is called for each
	// download so a rotated token file is picked up.
	Token func() (string, error)
	// Audience, when set, must be among the token's audiences, or the token
	// is not sent (and nothing is downloaded).
	Audience string
	// Limits bound the download (MaxFetchBytes) and what it may expand to
	// (unset fields take unpack.DefaultLimits).
	Limits unpack.Limits
	// TempDir holds a download until its digest is verified; "" is
	// os.TempDir().
	TempDir string
}

// NewFallbackLoader loads from local first, then downloads from the
// content service at baseURL with client (which must trust the service's
// CA; see NewHTTPClient), sending the bearer token that token returns.
func NewFallbackLoader(local Loader, baseURL string, client *http.Client, token func() (string, error)) (*FallbackLoader, error) {
	if _, err := contentBase(baseURL); err != nil {
		return nil, err
	}
	return &FallbackLoader{Local: local, BaseURL: baseURL, Client: client, Token: token}, nil
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
	u, err := l.urlFor(bundle)
	if err != nil {
		return nil, fmt.Errorf("loading content of bundle %q: %w", bundle.Name, err)
	}
	fsys, err := l.download(ctx, u, bundle.Status.ContentDigest)
	if err != nil {
		return nil, fmt.Errorf("loading content of bundle %q from %s: %w", bundle.Name, u, err)
	}
	return fsys, nil
}

// urlFor derives the Bundle's content URL from configuration and its name;
// status.contentURL is never read.
func (l *FallbackLoader) urlFor(bundle *rukpakv1alpha1.Bundle) (string, error) {
	name, err := archiveName(bundle)
	if err != nil {
		return "", err
	}
	base := l.BaseURL
	if b, ok := l.ClassBaseURLs[bundle.Spec.ProvisionerClassName]; ok {
		base = b
	}
	u, err := contentBase(base)
	if err != nil {
		return "", err
	}
	return u + BundlesPath + name, nil
}

// CheckContentURL validates a content service base URL: https, a host, no
// credentials, query or fragment.
func CheckContentURL(base string) error {
	_, err := contentBase(base)
	return err
}

// contentBase validates a content service base URL and returns it without
// a trailing slash.
func contentBase(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("content service URL %q: %w", base, err)
	}
	if u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("content service URL %q must be https://host[:port][/path], with no credentials, query or fragment", base)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

func (l *FallbackLoader) download(ctx context.Context, u, wantDigest string) (fs.FS, error) {
	if err := validDigest(wantDigest); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("building request: %w", err)
	}
	if l.Token != nil {
		token, err := l.Token()
		if err != nil {
			// Not wrapped: a missing token file is no missing content.
			return nil, errors.New("getting bearer token: " + err.Error())
		}
		if l.Audience != "" {
			if err := checkAudience(token, l.Audience); err != nil {
				return nil, err
			}
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := http.Client{Transport: http.DefaultTransport}
	if l.Client != nil {
		client = *l.Client
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// A short excerpt of the body usually says why (forbidden for
		// which user, for instance).
		return nil, fmt.Errorf("server answered %s: %s", resp.Status, unpack.Excerpt(resp.Body))
	}

	// The bytes are spooled and verified before anything parses them.
	limits := l.Limits.OrDefault()
	tmp, err := os.CreateTemp(l.TempDir, "content-download-")
	if err != nil {
		return nil, fmt.Errorf("creating temporary file: %w", err)
	}
	defer func() {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(resp.Body, limits.MaxFetchBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading body: %w", err)
	}
	if n > limits.MaxFetchBytes {
		return nil, fmt.Errorf("content is larger than %d bytes", limits.MaxFetchBytes)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != wantDigest {
		return nil, fmt.Errorf("content digest %s does not match status.contentDigest %s: refusing it", got, wantDigest)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("rewinding download: %w", err)
	}
	return ReadArchive(tmp, l.Limits)
}

func validDigest(d string) error {
	hexPart, ok := strings.CutPrefix(d, "sha256:")
	if d == "" {
		return errors.New("status.contentDigest is empty, so downloaded content cannot be verified")
	}
	if _, err := hex.DecodeString(hexPart); !ok || err != nil || len(hexPart) != sha256.Size*2 {
		return fmt.Errorf("status.contentDigest %q is not sha256:<64 hex digits>", unpack.Sanitize(d))
	}
	return nil
}

// checkAudience refuses a token whose (unverified) aud claim does not list
// audience: a misconfigured token file must not send the API server token
// anywhere. The content server verifies the token for real.
func checkAudience(token, audience string) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return fmt.Errorf("refusing to send the bearer token: it is not a JWT bound to audience %q", audience)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return fmt.Errorf("refusing to send the bearer token: decoding its claims: %w", err)
	}
	var claims struct {
		Aud json.RawMessage `json:"aud"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return fmt.Errorf("refusing to send the bearer token: decoding its claims: %w", err)
	}
	var auds []string
	if err := json.Unmarshal(claims.Aud, &auds); err != nil {
		var one string
		if json.Unmarshal(claims.Aud, &one) == nil {
			auds = []string{one}
		}
	}
	if !slices.Contains(auds, audience) {
		return fmt.Errorf("refusing to send the bearer token: its audiences %q do not include %q", auds, audience)
	}
	return nil
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

// NewHTTPClient returns a client for the content service that trusts the
// PEM certificates in caPEM in addition to the system roots, and follows no
// redirects.
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
	return &http.Client{
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}
