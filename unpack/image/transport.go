package image

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"sync"
	"time"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
)

// maxTransports bounds the transports kept for distinct TLS settings.
const maxTransports = 32

// maxIdlePerRegistry is how many idle connections to one registry are kept.
const maxIdlePerRegistry = 32

// transports shares one HTTP transport per TLS setting (extra CA,
// verification on or off). Connections to a registry are reused across
// Bundles and each CA pool is built once; a transport per unpack left its
// idle connections and its copy of the system roots behind for every Bundle.
type transports struct {
	mu sync.Mutex
	m  map[transportKey]*http.Transport
}

type transportKey struct {
	ca       [sha256.Size]byte
	insecure bool
}

func (ts *transports) get(src *rukpakv1alpha1.ImageSource) (http.RoundTripper, error) {
	key := transportKey{sha256.Sum256([]byte(src.CertificateData)), src.InsecureSkipTLSVerify}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t, ok := ts.m[key]; ok {
		return t, nil
	}
	t, err := transportFor(src)
	if err != nil {
		return nil, err
	}
	if ts.m == nil {
		ts.m = map[transportKey]*http.Transport{}
	}
	for k, old := range ts.m {
		if len(ts.m) < maxTransports {
			break
		}
		old.CloseIdleConnections()
		delete(ts.m, k)
	}
	ts.m[key] = t
	return t, nil
}

// transportFor applies the source's TLS settings: extra CAs on top of the
// system roots, or no verification at all.
func transportFor(src *rukpakv1alpha1.ImageSource) (*http.Transport, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// Many Bundles unpack from one registry at once. Over HTTP/1.1 each
	// pull holds a connection; with the default two kept idle per host,
	// the rest were closed after each request and the next ones paid a
	// TLS handshake again (~150 of them for sixty operators, ~50 kB of
	// allocation each).
	t.MaxIdleConnsPerHost = maxIdlePerRegistry
	// Registries are the bundle authors' to choose: what idles is bounded
	// per transport and let go sooner than the default 90 s.
	t.MaxIdleConns = 2 * maxIdlePerRegistry
	t.IdleConnTimeout = 30 * time.Second
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if src.CertificateData != "" {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM([]byte(src.CertificateData)) {
			return nil, unpack.Terminal(fmt.Errorf("image %q: certificateData holds no PEM certificate", src.Ref))
		}
		tlsConfig.RootCAs = pool
	}
	// The user asked for it explicitly, for test registries.
	tlsConfig.InsecureSkipVerify = src.InsecureSkipTLSVerify //nolint:gosec
	t.TLSClientConfig = tlsConfig
	return t, nil
}
