// Command webhook serves the core.rukpak.io validating admission webhook:
// Bundle spec immutability and source checks for Bundles and
// BundleDeployments, and the CRD upgrade check of hand edits of
// release-owned CRDs.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/crdupgrade"
	"github.com/rukpak-dev/rukpak/internal/lazylog"
	"github.com/rukpak-dev/rukpak/internal/securemetrics"
	"github.com/rukpak-dev/rukpak/webhook"
	"github.com/rukpak-dev/rukpak/webhook/certs"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		namespace, bundleNamespace, certDir, certMode string
		webhookConfigName, serviceName, extraDNSNames string
		probeAddr, metricsAddr, metricsCertDir        string
		defaultSA, provisionerSA                      string
		port                                          int
		enableHTTP2, leaderElect                      bool
		crdCheckRole                                  string
	)
	crdCheck := crdupgrade.Options{Timeout: webhook.DefaultCRDCheckTimeout}
	flag.StringVar(&namespace, "namespace", "rukpak-system", "Namespace the webhook runs in; holds the certificate Secret and the leader-election lease.")
	flag.StringVar(&bundleNamespace, "bundle-namespace", "rukpak-system", "Provisioners' namespace, where the Secrets and ConfigMaps that Bundle sources name live; their creators must be allowed to get them there.")
	flag.StringVar(&defaultSA, "default-service-account", "", "The provisioner's --default-service-account (NAMESPACE/NAME; keep them equal): BundleDeployments without spec.serviceAccount install as it, so their authors must be allowed to impersonate it.")
	flag.StringVar(&provisionerSA, "provisioner-service-account", "rukpak-system/rukpak-provisioner", "The provisioner's own ServiceAccount (NAMESPACE/NAME): without spec.serviceAccount and --default-service-account a BundleDeployment installs as the provisioner, which takes impersonate on it (a right only cluster-admins hold); so does writing the annotation core.rukpak.io/creating-bundle.")
	flag.IntVar(&port, "port", 9443, "Port the webhook server listens on.")
	flag.StringVar(&certDir, "cert-dir", filepath.Join(os.TempDir(), "rukpak-webhook", "serving-certs"), "Directory of tls.crt and tls.key.")
	flag.StringVar(&certMode, "cert-mode", string(webhook.CertModeSelf), "Where certificates come from: 'self' (generated, rotated and injected by this process) or 'cert-manager' (read from --cert-dir).")
	flag.StringVar(&webhookConfigName, "webhook-config-name", webhook.DefaultConfigurationName, "ValidatingWebhookConfiguration whose caBundle is kept current in self mode.")
	flag.StringVar(&serviceName, "service-name", "rukpak-webhook-service", "Service in front of the webhook; the serving certificate is issued for <service>.<namespace>.svc.")
	flag.StringVar(&extraDNSNames, "extra-dns-names", "", "Comma-separated extra DNS names for the self-managed serving certificate (e.g. localhost).")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Address of the metrics endpoint (HTTPS; only bearer tokens the API server authenticates and authorizes to get /metrics, e.g. of a ServiceAccount bound to rukpak-metrics-reader); 0 disables it.")
	flag.StringVar(&metricsCertDir, "metrics-cert-dir", "", "Directory of the metrics endpoint's tls.crt and tls.key, re-read when they change; empty (or no files there): a self-signed certificate generated at start.")
	flag.BoolVar(&enableHTTP2, "enable-http2", false, "Serve HTTP/2 as well as HTTP/1.1 (off by default: HTTP/2 rapid-reset and stream-exhaustion attacks).")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Rotate certificates only on the elected leader; enable when running more than one replica.")
	flag.StringVar(&crdCheckRole, "crd-check-cluster-role", webhook.DefaultCRDCheckClusterRole, "The ClusterRole the provisioner keeps granting this webhook list on the resources of release-owned CRDs (its --crd-check-cluster-role), named in the warning when a hand edit of such a CRD could not be checked.")
	// The same bounds as the provisioner's preflight, with this process's
	// own memory budget and a timeout under the webhook configuration's
	// timeoutSeconds (5).
	crdCheck.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	// Lazily: every reconcile's logger carries its request, which zap would
	// encode at once though most reconciles log nothing.
	ctrl.SetLogger(lazylog.New(zap.New(zap.UseFlagOptions(&zapOpts))))
	crdCheck.Resolve()
	if crdCheck.Timeout <= 0 || crdCheck.Timeout >= 30*time.Second {
		// The API server waits at most 30 s for a webhook.
		return fmt.Errorf("--%s=%s: want more than 0 and less than the webhook configuration's timeoutSeconds (at most 30s)", crdupgrade.FlagTimeout, crdCheck.Timeout)
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return fmt.Errorf("building scheme: %w", err)
	}
	if err := rukpakv1alpha1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("building scheme: %w", err)
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 securemetrics.Options(metricsAddr, metricsCertDir),
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "rukpak-webhook.core.rukpak.io",
		LeaderElectionNamespace: namespace,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	delegation, err := parseDelegation(defaultSA, provisionerSA)
	if err != nil {
		return err
	}

	ctx := ctrl.SetupSignalHandler()
	var extra []string
	for _, n := range strings.Split(extraDNSNames, ",") {
		if n = strings.TrimSpace(n); n != "" {
			extra = append(extra, n)
		}
	}
	svcDNS := fmt.Sprintf("%s.%s.svc", serviceName, namespace)
	if err := webhook.SetupWithManager(ctx, mgr, webhook.Config{
		Server:              webhook.ServerOptions{Port: port, CertDir: certDir, EnableHTTP2: enableHTTP2},
		BundleNamespace:     bundleNamespace,
		Delegation:          delegation,
		CertMode:            webhook.CertMode(certMode),
		CRDCheck:            crdCheck,
		CRDCheckClusterRole: crdCheckRole,
		Certs: certs.Options{
			Namespace:             namespace,
			DNSName:               svcDNS,
			ExtraDNSNames:         append([]string{svcDNS + ".cluster.local"}, extra...),
			WebhookConfigurations: []string{webhookConfigName},
			RequireLeaderElection: leaderElect,
		},
	}); err != nil {
		return err
	}

	ctrl.Log.WithName("setup").Info("starting webhook", "port", port, "certMode", certMode)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
}

func parseDelegation(defaultSA, provisionerSA string) (webhook.Delegation, error) {
	var d webhook.Delegation
	if defaultSA != "" {
		sa, err := webhook.ParseServiceAccount(defaultSA)
		if err != nil {
			return d, fmt.Errorf("--default-service-account: %w", err)
		}
		d.Default = &sa
	}
	sa, err := webhook.ParseServiceAccount(provisionerSA)
	if err != nil {
		return d, fmt.Errorf("--provisioner-service-account: %w", err)
	}
	d.Provisioner = sa
	return d, nil
}
