// Package testregistry runs a real OCI registry (go-containerregistry's
// pkg/registry, in memory) over TLS, with a CA generated on the fly and
// optional basic auth, and builds and pushes images for tests. It listens on
// 127.0.0.1 unless WithHost names another host.
package testregistry

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rukpak-dev/rukpak/internal/selfsigned"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Registry is a running test registry.
type Registry struct {
	// Host is host:port, the registry part of image references, e.g.
	// 127.0.0.1:41234 (or [::1]:41234: an IPv6 host is bracketed).
	Host string
	// CAPEM is the PEM certificate of the CA that signed the serving
	// certificate; trust it to talk to the registry.
	CAPEM []byte
	// Username and Password are the basic-auth credentials, when enabled.
	Username, Password string

	// advertise is the host (without port) the registry is named by;
	// empty means 127.0.0.1.
	advertise string
	server    *httptest.Server
	blobPulls atomic.Int64
}

// Option configures a Registry.
type Option func(*Registry)

// WithBasicAuth requires these credentials on every request.
func WithBasicAuth(username, password string) Option {
	return func(r *Registry) { r.Username, r.Password = username, password }
}

// WithHost names the registry by host (an IP address or a DNS name, without
// port) instead of 127.0.0.1: Host and Ref use it, and the serving
// certificate is valid for it (IP or DNS SAN) as well as for 127.0.0.1 and
// localhost. The registry listens on that IP address; on 127.0.0.1 for
// "localhost"; and on all interfaces for any other name (such as
// host.docker.internal, which need not resolve to an address of this
// machine). Only name a non-loopback host for a network you trust, such as
// kind's Docker bridge: anyone who reaches it can push and pull.
func WithHost(host string) Option {
	return func(r *Registry) { r.advertise = host }
}

// Start starts a registry; Close stops it.
func Start(opts ...Option) (*Registry, error) {
	r := &Registry{}
	for _, o := range opts {
		o(r)
	}
	host, err := normalizeHost(r.advertise)
	if err != nil {
		return nil, err
	}
	pair, err := selfsigned.New([]string{host, "127.0.0.1", "localhost"}, 24*time.Hour)
	if err != nil {
		return nil, fmt.Errorf("test registry certificate: %w", err)
	}
	cert, err := pair.TLSCertificate()
	if err != nil {
		return nil, err
	}
	r.CAPEM = pair.CAPEM
	ln, err := net.Listen("tcp", net.JoinHostPort(listenHost(host), "0"))
	if err != nil {
		return nil, fmt.Errorf("test registry listening for host %q: %w", host, err)
	}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.server = httptest.NewUnstartedServer(r.middleware(reg))
	_ = r.server.Listener.Close()
	r.server.Listener = ln
	// Handshakes that tests make fail on purpose are not worth a log line.
	r.server.Config.ErrorLog = log.New(io.Discard, "", 0)
	r.server.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	r.server.StartTLS()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	if err != nil {
		r.server.Close()
		return nil, err
	}
	r.Host = net.JoinHostPort(host, port)
	return r, nil
}

// normalizeHost checks a WithHost value and defaults it to 127.0.0.1.
func normalizeHost(host string) (string, error) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	switch {
	case host == "":
		return "127.0.0.1", nil
	case strings.ContainsAny(host, "/@ ") || (strings.Contains(host, ":") && net.ParseIP(host) == nil):
		return "", fmt.Errorf("test registry host %q: want an IP address or a DNS name, without port", host)
	}
	return host, nil
}

// listenHost is the address to listen on for clients naming host: the IP
// itself, loopback for localhost, all interfaces ("") for any other name.
func listenHost(host string) string {
	if host == "localhost" {
		return "127.0.0.1"
	}
	if net.ParseIP(host) != nil {
		return host
	}
	return ""
}

// New starts a registry that stops when the test ends.
func New(tb testing.TB, opts ...Option) *Registry {
	tb.Helper()
	r, err := Start(opts...)
	if err != nil {
		tb.Fatalf("starting test registry: %v", err)
	}
	tb.Cleanup(r.Close)
	return r
}

// Close stops the registry.
func (r *Registry) Close() { r.server.Close() }

func (r *Registry) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.Username != "" {
			u, p, ok := req.BasicAuth()
			if !ok || u != r.Username || p != r.Password {
				w.Header().Set("WWW-Authenticate", `Basic realm="testregistry"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
		}
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") {
			r.blobPulls.Add(1)
		}
		next.ServeHTTP(w, req)
	})
}

// BlobPulls counts blob downloads so far, to prove what a cache saved.
func (r *Registry) BlobPulls() int64 { return r.blobPulls.Load() }

// Ref is the reference of repository[:tag] or repository@digest in this
// registry, e.g. Ref("bundle:v1").
func (r *Registry) Ref(repoAndTag string) string { return r.Host + "/" + repoAndTag }

// CertPool trusts the registry's CA (and nothing else).
func (r *Registry) CertPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(r.CAPEM)
	return pool
}

// Transport talks to the registry, trusting its CA.
func (r *Registry) Transport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: r.CertPool(), MinVersion: tls.VersionTLS12}
	return t
}

// RemoteOptions push to and pull from the registry with its CA and
// credentials.
func (r *Registry) RemoteOptions() []remote.Option {
	auth := authn.Anonymous
	if r.Username != "" {
		auth = &authn.Basic{Username: r.Username, Password: r.Password}
	}
	return []remote.Option{remote.WithTransport(r.Transport()), remote.WithAuth(auth)}
}

// DockerConfigJSON is the content of a kubernetes.io/dockerconfigjson
// Secret (key .dockerconfigjson) holding these credentials for this registry.
func (r *Registry) DockerConfigJSON(username, password string) []byte {
	auth := base64.StdEncoding.EncodeToString([]byte(username + ":" + password))
	b, _ := json.Marshal(map[string]any{"auths": map[string]any{
		r.Host: map[string]string{"username": username, "password": password, "auth": auth},
	}})
	return b
}

// Push writes img under ref (a full reference, see Ref) and returns the
// image's digest reference, repository@sha256:....
func (r *Registry) Push(ref string, img v1.Image) (string, error) {
	tag, err := name.ParseReference(ref)
	if err != nil {
		return "", fmt.Errorf("parsing %q: %w", ref, err)
	}
	if err := remote.Write(tag, img, r.RemoteOptions()...); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	return tag.Context().Digest(digest.String()).String(), nil
}

// MustPush is Push failing the test on error.
func (r *Registry) MustPush(tb testing.TB, ref string, img v1.Image) string {
	tb.Helper()
	d, err := r.Push(ref, img)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}
