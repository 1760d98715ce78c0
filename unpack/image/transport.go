package image

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
)

// transportFor applies the source's TLS settings: extra CAs on top of the
// system roots, or no verification at all.
func transportFor(src *rukpakv1alpha1.ImageSource) (http.RoundTripper, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
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
