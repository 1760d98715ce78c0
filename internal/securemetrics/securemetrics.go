// Package securemetrics configures controller-runtime's metrics server as
// both binaries serve it: over HTTPS, and only to callers the API server
// authenticates (TokenReview) and authorizes to get the non-resource URL
// /metrics (SubjectAccessReview), as kubebuilder scaffolds it. Metrics name
// every Bundle and BundleDeployment and their conditions; they are not for
// anyone who reaches the pod network.
package securemetrics

import (
	"crypto/tls"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Options serves metrics on bindAddress ("0" disables them) with the
// certificate tls.crt/tls.key of certDir, re-read when it changes; with no
// certDir, or no files in it, with a self-signed certificate generated at
// start (scrapers then skip verification, as for kube-controller-manager's).
// HTTP/1.1 only: HTTP/2 rapid-reset and stream-exhaustion attacks need no
// credentials.
func Options(bindAddress, certDir string) metricsserver.Options {
	return metricsserver.Options{
		BindAddress:    bindAddress,
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		CertDir:        certDir,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			c.MinVersion = tls.VersionTLS12
			c.NextProtos = []string{"http/1.1"}
		}},
	}
}
