package unpack

import (
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// CheckSecretHost returns a terminal error unless the auth Secret's
// core.rukpak.io/allowed-hosts annotation lists host (a URL's host, with or
// without a port). An entry without a port allows every port of that host;
// "*.example.com" allows every name under example.com (not example.com
// itself). Names compare case-insensitively.
func CheckSecretHost(secret *corev1.Secret, host string) error {
	ref := secret.Namespace + "/" + secret.Name
	raw, ok := secret.Annotations[rukpakv1alpha1.AnnotationAllowedHosts]
	if !ok || strings.TrimSpace(raw) == "" {
		return Terminal(fmt.Errorf("auth Secret %s does not say which hosts its credentials are for: annotate it with %s (for example %q)",
			ref, rukpakv1alpha1.AnnotationAllowedHosts, hostOnly(host)))
	}
	name, port := splitHost(host)
	if !asciiHost(name) {
		// Clients dial a non-ASCII name in its IDNA form, which compares
		// otherwise than its lowercase text ("gİthub.com" lowercases to
		// "github.com" but is dialled as xn--gthub-h4a.com).
		return Terminal(fmt.Errorf("auth Secret %s is not for host %q: credentials are only sent to host names of ASCII letters, digits, hyphens and dots (or IP addresses)", ref, Sanitize(host)))
	}
	for _, entry := range strings.Split(raw, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		eName, ePort := splitHost(entry)
		if ePort != "" && ePort != port {
			continue
		}
		if suffix, wild := strings.CutPrefix(eName, "*."); wild {
			if strings.HasSuffix(name, "."+suffix) {
				return nil
			}
			continue
		}
		if eName == name {
			return nil
		}
	}
	return Terminal(fmt.Errorf("auth Secret %s is not for host %q (its %s annotation allows %q)",
		ref, host, rukpakv1alpha1.AnnotationAllowedHosts, Sanitize(raw)))
}

// splitHost lower-cases a host[:port] and splits off the port, if any.
// asciiHost reports whether name is a host name of ASCII letters,
// digits, hyphens and dots, or an IP address (IPv6 with colons).
func asciiHost(name string) bool {
	if name == "" {
		return false
	}
	if net.ParseIP(name) != nil {
		return true
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}

func splitHost(hostport string) (string, string) {
	// ASCII-only lowering: strings.ToLower maps some non-ASCII letters to
	// ASCII ones ("İ" to "i").
	hostport = asciiLower(strings.TrimSpace(hostport))
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return strings.Trim(h, "[]"), p
	}
	return strings.Trim(hostport, "[]"), ""
}

func hostOnly(host string) string {
	h, _ := splitHost(host)
	return h
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
