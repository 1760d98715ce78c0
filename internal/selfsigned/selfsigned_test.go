package selfsigned

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

func TestNewVerifiesForEveryHost(t *testing.T) {
	hosts := []string{"svc.ns.svc", "localhost", "127.0.0.1", "::1", "localhost"}
	p, err := New(hosts, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(p.CertPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(p.CAPEM) {
		t.Fatal("CA PEM does not parse")
	}
	for _, h := range append(hosts, "") {
		_, err := cert.Verify(x509.VerifyOptions{DNSName: h, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		if h == "" {
			continue
		}
		if err != nil {
			t.Errorf("certificate does not verify for %q: %v", h, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "other.example.com", Roots: roots}); err == nil {
		t.Errorf("certificate verifies for a host it was not issued for")
	}
	if _, err := p.TLSCertificate(); err != nil {
		t.Errorf("key pair: %v", err)
	}
	if got := len(cert.DNSNames) + len(cert.IPAddresses); got != 4 {
		t.Errorf("%d SANs, want 4 (duplicates dropped)", got)
	}
}
