// Package servingcert issues the serving certificates of the webhooks a
// BundleDeployment installs, and injects their CA bundles, without anything
// else installed in the cluster.
//
// Content asks for a certificate with a Secret annotated AnnotationDNSNames,
// and for its CA bundle with AnnotationInjectCAFrom on webhook
// configurations, CRDs (conversion webhooks) and APIServices. Just before
// the release is applied, Issuer.Prepare fills both in: the Secret with the
// certificate the live Secret already holds, or a new one when that is
// missing, invalid or due for renewal. The release manifest is then the
// same from one reconcile to the next, so nothing is written until a
// certificate is due; a renewal is one new release revision.
//
// Each certificate has its own CA, created with it and signed once: its
// private key is never stored. A renewal puts the previous CA in the bundle
// after the new one, so pods still serving the previous certificate (until
// the kubelet refreshes their Secret volume) stay trusted.
package servingcert

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"
)

// Annotations that ask for certificates and CA bundles.
const (
	// AnnotationDNSNames on a Secret lists, comma-separated, the DNS names
	// of the serving certificate to keep in it (keys tls.crt, tls.key and
	// CAFile).
	AnnotationDNSNames = "core.rukpak.io/serving-certificate-dns-names"
	// AnnotationInjectCAFrom on an object names, as <namespace>/<name>, the
	// Secret whose CA bundle goes into its caBundle fields.
	AnnotationInjectCAFrom = "core.rukpak.io/inject-ca-from"
)

// Keys of a certificate Secret.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
	// CAFile holds the CA bundle: the CA that signed tls.crt, then the one
	// that signed the certificate before it, while that one is valid.
	CAFile = "ca.crt"
)

// ServiceDNSNames are the names the API server and in-cluster clients reach
// a Service by.
func ServiceDNSNames(service, namespace string) []string {
	return []string{service + "." + namespace + ".svc", service + "." + namespace + ".svc.cluster.local"}
}

// Defaults of Issuer.
const (
	DefaultValidity    = 365 * 24 * time.Hour
	DefaultRenewBefore = 90 * 24 * time.Hour
)

// backdate makes a new certificate valid a little before now, for clocks
// that lag ours.
const backdate = time.Hour

// Decision says whether a certificate Secret's content is kept, and until
// when.
type Decision struct {
	// Renew is true when a new certificate must be issued; Reason says why.
	Renew  bool
	Reason string
	// RenewAt is when the kept certificate is due.
	RenewAt time.Time
}

// Decide looks at a certificate Secret's data: it is kept when it holds a
// key pair for every name in dnsNames, signed by the first CA of its
// bundle, valid now and for more than renewBefore.
func Decide(now time.Time, data map[string][]byte, dnsNames []string, renewBefore time.Duration) Decision {
	renew := func(format string, args ...interface{}) Decision {
		return Decision{Renew: true, Reason: fmt.Sprintf(format, args...)}
	}
	if len(data[CertFile]) == 0 || len(data[KeyFile]) == 0 || len(data[CAFile]) == 0 {
		return renew("no certificate yet")
	}
	pair, err := tls.X509KeyPair(data[CertFile], data[KeyFile])
	if err != nil {
		return renew("invalid key pair: %v", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return renew("invalid certificate: %v", err)
	}
	cas, err := parseCerts(data[CAFile])
	if err != nil || len(cas) == 0 {
		return renew("invalid CA bundle")
	}
	for _, name := range dnsNames {
		if err := cert.VerifyHostname(name); err != nil {
			return renew("certificate is not valid for %s", name)
		}
	}
	if cert.CheckSignatureFrom(cas[0]) != nil {
		return renew("certificate is not signed by the CA bundle's first CA")
	}
	due := earliest(cert.NotAfter, cas[0].NotAfter).Add(-renewBefore)
	switch {
	case now.Before(cert.NotBefore) || now.Before(cas[0].NotBefore):
		return renew("certificate is not valid before %s", cert.NotBefore.UTC().Format(time.RFC3339))
	case !now.Before(due):
		return renew("certificate expires at %s", earliest(cert.NotAfter, cas[0].NotAfter).UTC().Format(time.RFC3339))
	}
	return Decision{RenewAt: due}
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Issue creates a CA and a serving certificate for dnsNames signed by it,
// both valid from now (backdated) for validity, and returns a certificate
// Secret's data. previous is the data being replaced: the CA that signed
// its certificate stays in the new bundle, after the new CA, while it is
// valid.
func Issue(now time.Time, dnsNames []string, validity time.Duration, previous map[string][]byte) (map[string][]byte, error) {
	if len(dnsNames) == 0 {
		return nil, errors.New("no DNS names to issue a certificate for")
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	notBefore := now.Add(-backdate)
	// The CA outlives its only certificate, so the certificate is what
	// expires first.
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "rukpak serving CA for " + dnsNames[0], Organization: []string{"rukpak"}},
		NotBefore:             notBefore,
		NotAfter:              now.Add(validity + backdate),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := sign(caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("signing CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating serving key: %w", err)
	}
	certDER, err := sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: dnsNames[0]},
		DNSNames:    slices.Clone(dnsNames),
		NotBefore:   notBefore,
		NotAfter:    now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, key.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("signing serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	bundle := pemCert(caDER)
	if prev := previousCA(now, previous); prev != nil {
		bundle = append(bundle, pemCert(prev.Raw)...)
	}
	return map[string][]byte{
		CertFile: pemCert(certDER),
		KeyFile:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		CAFile:   bundle,
	}, nil
}

// previousCA is the CA that signed previous's certificate, if it did and is
// still valid.
func previousCA(now time.Time, previous map[string][]byte) *x509.Certificate {
	cas, err := parseCerts(previous[CAFile])
	if err != nil || len(cas) == 0 {
		return nil
	}
	certs, err := parseCerts(previous[CertFile])
	if err != nil || len(certs) == 0 || certs[0].CheckSignatureFrom(cas[0]) != nil {
		return nil
	}
	if now.Before(cas[0].NotBefore) || !now.Before(cas[0].NotAfter) {
		return nil
	}
	return cas[0]
}

func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, priv crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	return x509.CreateCertificate(rand.Reader, tmpl, parent, pub, priv)
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// maxBundleCerts bounds the certificates read from one bundle (two are
// ever written).
const maxBundleCerts = 8

func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := bytes.TrimSpace(data); len(rest) > 0 && len(out) < maxBundleCerts; rest = bytes.TrimSpace(rest) {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("not PEM")
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// splitNames parses AnnotationDNSNames.
func splitNames(v string) []string {
	var out []string
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}
