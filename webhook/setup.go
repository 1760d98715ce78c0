package webhook

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/rukpak-dev/rukpak/internal/crdupgrade"
	"github.com/rukpak-dev/rukpak/webhook/certs"
)

// CertMode says where the serving certificate comes from.
type CertMode string

const (
	// CertModeSelf generates, rotates and injects certificates in-process.
	CertModeSelf CertMode = "self"
	// CertModeCertManager reads certificates cert-manager mounted in the
	// certificate directory; its CA injector sets the caBundle.
	CertModeCertManager CertMode = "cert-manager"
)

// Config is everything the webhook binary wires together.
type Config struct {
	Server ServerOptions
	// BundleNamespace is the provisioners' namespace, where the Secrets and
	// ConfigMaps sources reference live.
	BundleNamespace string
	// Delegation names the provisioner's default and own ServiceAccounts:
	// the identities BundleDeployments without spec.serviceAccount
	// install as, which their authors must be allowed to impersonate.
	Delegation Delegation
	CertMode   CertMode
	// Certs configure CertModeSelf; its CertDir is Server.CertDir.
	Certs certs.Options
	// CRDCheck bounds the check of hand edits of release-owned CRDs
	// (crd.go): zero Timeout is DefaultCRDCheckTimeout, nil Budget one of
	// crdupgrade.DefaultMemoryBytes for this process alone.
	CRDCheck crdupgrade.Options
	// CRDCheckClusterRole is named when the webhook may not list a CRD's
	// objects (empty: DefaultCRDCheckClusterRole).
	CRDCheckClusterRole string
}

// SetupWithManager adds the webhook server, its certificates and its health
// checks to mgr. The server starts, and readyz passes, once the serving
// certificate is in place.
func SetupWithManager(ctx context.Context, mgr manager.Manager, cfg Config) error {
	var ready <-chan struct{}
	switch cfg.CertMode {
	case CertModeSelf, "":
		c := cfg.Certs
		c.CertDir = cfg.Server.CertDir
		r, err := certs.AddSelfManaged(ctx, mgr, c)
		if err != nil {
			return fmt.Errorf("setting up self-managed certificates: %w", err)
		}
		ready = r
	case CertModeCertManager:
		r, err := certs.DirReady(cfg.Server.CertDir)
		if err != nil {
			return err
		}
		ready = r
	default:
		return fmt.Errorf("unknown certificate mode %q: use %q or %q", cfg.CertMode, CertModeSelf, CertModeCertManager)
	}

	srv := NewServer(cfg.Server)
	Register(srv, mgr.GetScheme(), &SourceValidator{Reader: mgr.GetAPIReader(), Reviewer: mgr.GetClient(), Namespace: cfg.BundleNamespace}, cfg.Delegation)
	lister, err := crdupgrade.NewRESTLister(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return err
	}
	opts := cfg.CRDCheck
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultCRDCheckTimeout
	}
	if opts.Budget == nil {
		opts.Budget = crdupgrade.NewBudget(crdupgrade.DefaultMemoryBytes)
	}
	RegisterCRDCheck(srv, &CRDCheck{BundleDeployments: mgr.GetAPIReader(), Objects: lister, Options: opts, ClusterRole: cfg.CRDCheckClusterRole})
	if err := mgr.Add(certs.AfterReady(ready, srv)); err != nil {
		return fmt.Errorf("adding webhook server: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("certificates", certs.ReadyChecker(ready)); err != nil {
		return fmt.Errorf("adding certificate readiness check: %w", err)
	}
	if err := mgr.AddReadyzCheck("webhook-server", srv.StartedChecker()); err != nil {
		return fmt.Errorf("adding webhook server readiness check: %w", err)
	}
	return nil
}
