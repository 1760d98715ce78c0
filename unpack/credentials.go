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
func splitHost(hostport string) (string, string) {
	hostport = strings.ToLower(strings.TrimSpace(hostport))
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return strings.Trim(h, "[]"), p
	}
	return strings.Trim(hostport, "[]"), ""
}

func hostOnly(host string) string {
	h, _ := splitHost(host)
	return h
}
