package unpack

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

func TestCheckSecretHost(t *testing.T) {
	secret := func(allowed *string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "rukpak-system", Name: "creds"}}
		if allowed != nil {
			s.Annotations = map[string]string{rukpakv1alpha1.AnnotationAllowedHosts: *allowed}
		}
		return s
	}
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name    string
		allowed *string
		host    string
		wantErr string
	}{
		{name: "no annotation", host: "git.example.com", wantErr: `auth Secret rukpak-system/creds does not say which hosts its credentials are for: annotate it with core.rukpak.io/allowed-hosts (for example "git.example.com")`},
		{name: "empty annotation", allowed: str(" "), host: "git.example.com:8443", wantErr: `(for example "git.example.com")`},
		{name: "exact", allowed: str("git.example.com"), host: "git.example.com"},
		{name: "any port", allowed: str("git.example.com"), host: "git.example.com:8443"},
		{name: "case", allowed: str("Git.Example.COM"), host: "git.example.COM"},
		{name: "list", allowed: str("a.example.org, git.example.com"), host: "git.example.com"},
		{name: "port must match", allowed: str("git.example.com:443"), host: "git.example.com:8443", wantErr: `auth Secret rukpak-system/creds is not for host "git.example.com:8443" (its core.rukpak.io/allowed-hosts annotation allows "git.example.com:443")`},
		{name: "port matches", allowed: str("git.example.com:8443"), host: "git.example.com:8443"},
		{name: "other host", allowed: str("git.example.com"), host: "evil.example.net", wantErr: `is not for host "evil.example.net"`},
		{name: "suffix is not a subdomain", allowed: str("example.com"), host: "evilexample.com", wantErr: "is not for host"},
		{name: "wildcard", allowed: str("*.example.com"), host: "git.eu.example.com"},
		{name: "wildcard excludes apex", allowed: str("*.example.com"), host: "example.com", wantErr: "is not for host"},
		{name: "wildcard needs a dot", allowed: str("*.example.com"), host: "evilexample.com", wantErr: "is not for host"},
		{name: "ipv6", allowed: str("[::1]:5000"), host: "[::1]:5000"},
		{name: "ip", allowed: str("127.0.0.1"), host: "127.0.0.1:5002"},
		// Dialled as xn--gthub-h4a.com, though it lowercases to github.com.
		{name: "dotted capital I", allowed: str("github.com"), host: "g\u0130thub.com", wantErr: "credentials are only sent to host names of ASCII letters"},
		{name: "Kelvin sign", allowed: str("k.example.com"), host: "\u212a.example.com", wantErr: "credentials are only sent to host names of ASCII letters"},
		{name: "non-ASCII allowed too", allowed: str("g\u0130thub.com"), host: "g\u0130thub.com", wantErr: "credentials are only sent to host names of ASCII letters"},
		{name: "underscore", allowed: str("a_b.example.com"), host: "a_b.example.com", wantErr: "credentials are only sent to host names of ASCII letters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSecretHost(secret(tc.allowed), tc.host)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
			case err != nil && !IsTerminal(err):
				t.Fatalf("error %v is not terminal", err)
			}
		})
	}
}
