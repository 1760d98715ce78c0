package webhook

import (
	"crypto/tls"

	"k8s.io/apimachinery/pkg/runtime"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// Webhook names, as registered in the ValidatingWebhookConfiguration and
// quoted by the API server in denials.
const (
	BundleWebhookName           = "vbundles.core.rukpak.io"
	BundleDeploymentWebhookName = "vbundledeployments.core.rukpak.io"
	CRDWebhookName              = "vcustomresourcedefinitions.core.rukpak.io"
	CatalogWebhookName          = "vcatalogs.core.rukpak.io"
)

// Paths the handlers are served at.
const (
	BundlePath           = "/validate-core-rukpak-io-v1alpha1-bundle"
	BundleDeploymentPath = "/validate-core-rukpak-io-v1alpha1-bundledeployment"
	CRDPath              = "/validate-apiextensions-k8s-io-v1-customresourcedefinition"
	CatalogPath          = "/validate-core-rukpak-io-v1alpha1-catalog"
)

// DefaultConfigurationName is the ValidatingWebhookConfiguration shipped in
// manifests/base/webhook.
const DefaultConfigurationName = "rukpak-validating-webhook-configuration"

// ServerOptions configure the HTTPS server.
type ServerOptions struct {
	// Host to listen on; empty means all interfaces.
	Host string
	// Port to listen on.
	Port int
	// CertDir holds tls.crt and tls.key; they are reloaded when they change.
	CertDir string
	// EnableHTTP2 turns HTTP/2 on. It is off by default: HTTP/2 rapid reset
	// and stream-exhaustion attacks (CVE-2023-44487, CVE-2023-39325) cost
	// more than the protocol gains for a webhook.
	EnableHTTP2 bool
}

// NewServer returns a webhook server that speaks TLS 1.2 or later only.
func NewServer(o ServerOptions) ctrlwebhook.Server {
	tlsOpts := []func(*tls.Config){func(c *tls.Config) { c.MinVersion = tls.VersionTLS12 }}
	if !o.EnableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	return ctrlwebhook.NewServer(ctrlwebhook.Options{
		Host:    o.Host,
		Port:    o.Port,
		CertDir: o.CertDir,
		TLSOpts: tlsOpts,
	})
}

// Register serves the Bundle and BundleDeployment validators on srv;
// delegation says whom BundleDeployments naming no ServiceAccount install as.
func Register(srv ctrlwebhook.Server, scheme *runtime.Scheme, sources *SourceValidator, delegation Delegation) {
	srv.Register(BundlePath, &admission.Webhook{Handler: kindGuard{
		kind: rukpakv1alpha1.GroupVersion.WithKind("Bundle"),
		next: admission.WithValidator[*rukpakv1alpha1.Bundle](scheme, &BundleValidator{Sources: sources}).Handler,
	}})
	srv.Register(CatalogPath, &admission.Webhook{Handler: kindGuard{
		kind: rukpakv1alpha1.GroupVersion.WithKind("Catalog"),
		next: admission.WithValidator[*rukpakv1alpha1.Catalog](scheme, &CatalogValidator{Sources: sources}).Handler,
	}})
	srv.Register(BundleDeploymentPath, &admission.Webhook{Handler: kindGuard{
		kind: rukpakv1alpha1.GroupVersion.WithKind("BundleDeployment"),
		next: admission.WithValidator[*rukpakv1alpha1.BundleDeployment](scheme, &BundleDeploymentValidator{Sources: sources, Delegation: delegation}).Handler,
	}})
}

// RegisterCRDCheck serves the check of hand edits of release-owned CRDs on
// srv.
func RegisterCRDCheck(srv ctrlwebhook.Server, check *CRDCheck) {
	srv.Register(CRDPath, &admission.Webhook{Handler: kindGuard{kind: crdKind, next: check}})
}
