// Command provisioner runs the Bundle and BundleDeployment reconcilers of one
// or more provisioner classes, and serves stored bundle content over HTTPS.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/catalog/fbc"
	"github.com/rukpak-dev/rukpak/internal/crdupgrade"
	"github.com/rukpak-dev/rukpak/internal/idlemem"
	"github.com/rukpak-dev/rukpak/internal/lazylog"
	"github.com/rukpak-dev/rukpak/internal/leanmeta"
	"github.com/rukpak-dev/rukpak/internal/memlimit"
	"github.com/rukpak-dev/rukpak/internal/memomapper"
	"github.com/rukpak-dev/rukpak/internal/securemetrics"
	"github.com/rukpak-dev/rukpak/internal/selfsigned"
	"github.com/rukpak-dev/rukpak/provisioner"
	"github.com/rukpak-dev/rukpak/provisioner/bundledeployment"
	"github.com/rukpak-dev/rukpak/provisioner/catalogsource"
	"github.com/rukpak-dev/rukpak/provisioner/helm"
	"github.com/rukpak-dev/rukpak/provisioner/identity"
	"github.com/rukpak-dev/rukpak/provisioner/memo"
	"github.com/rukpak-dev/rukpak/provisioner/plain"
	"github.com/rukpak-dev/rukpak/provisioner/release"
	"github.com/rukpak-dev/rukpak/provisioner/servingcert"
	"github.com/rukpak-dev/rukpak/provisioner/shard"
	"github.com/rukpak-dev/rukpak/storage"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/configmaps"
	"github.com/rukpak-dev/rukpak/unpack/sources"
	"github.com/rukpak-dev/rukpak/unpack/upload"
	"github.com/rukpak-dev/rukpak/webhook/certs"
)

type options struct {
	classes     string
	namespace   string
	storageDir  string
	unpackDir   string
	contentAddr string
	contentURL  string
	tlsCertFile string
	tlsKeyFile  string
	tlsCAOut    string
	// selfSignedCert is the generated content certificate (no
	// --tls-cert-file and no --content-cert-secret).
	selfSignedCert    *tls.Certificate
	contentCertSecret string
	contentCertDir    string
	contentCAFile     string
	classContentURLs  string
	catalogContentURL string
	maxCatalogPackage int64
	contentAudience   string
	tokenFile         string
	bundleWorkers     int
	metricsAddr       string
	metricsCertDir    string
	probeAddr         string
	leaderElect       bool
	leaderElectionID  string
	pprofAddr         string
	limits            unpack.Limits
	catalogLimits     fbc.Limits
	maxReleaseBytes   int64
	objectCacheBytes  int64
	certValidity      time.Duration
	certRenewBefore   time.Duration
	defaultSA         string
	requireSA         bool
	watchSelector     string
	knownShards       string
	preflight         crdupgrade.Options
	crdCheckRole      string
	retryBase         time.Duration
	retryMax          time.Duration
	uploadDir         string
	maxUploads        int
	uploadTimeout     time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.classes, "provisioner-classes", rukpakv1alpha1.ProvisionerClassPlain+","+rukpakv1alpha1.ProvisionerClassRegistry+","+rukpakv1alpha1.ProvisionerClassHelm, "Comma-separated provisioner classes to run.")
	flag.StringVar(&o.namespace, "namespace", envOr("POD_NAMESPACE", "rukpak-system"), "Namespace holding pull/auth Secrets, ConfigMap sources and Helm release records.")
	flag.StringVar(&o.storageDir, "storage-dir", "/var/cache/bundles", "Directory for stored bundle content (tar.gz).")
	flag.StringVar(&o.unpackDir, "unpack-dir", "/var/cache/unpack", "Directory for unpacked trees and the image cache.")
	flag.StringVar(&o.contentAddr, "content-bind-address", ":8443", "Address of the HTTPS content server.")
	flag.StringVar(&o.contentURL, "content-url", "https://rukpak-core.rukpak-system.svc", "Base URL (https) of the content service; status.contentURL is <this>/bundles/<name>.tgz, and content another process stored is downloaded from there (never from status).")
	flag.StringVar(&o.tlsCertFile, "tls-cert-file", "", "Serving certificate of the content server; empty generates a self-signed one.")
	flag.StringVar(&o.tlsKeyFile, "tls-key-file", "", "Key of --tls-cert-file.")
	flag.StringVar(&o.tlsCAOut, "tls-ca-out", "", "With a generated certificate, write its CA here so clients can trust it.")
	flag.StringVar(&o.contentCertSecret, "content-cert-secret", "", "Secret (in --namespace) holding a self-managed CA and the content server's certificate, issued and rotated by the leader and served by every replica; clients trust its ca.crt. Empty: --tls-cert-file, or a per-process self-signed certificate.")
	flag.StringVar(&o.contentCertDir, "content-cert-dir", "/tmp/rukpak-content-certs", "Where every replica writes the certificate of --content-cert-secret.")
	flag.StringVar(&o.contentCAFile, "content-ca-file", "", "CA trusted when downloading content stored by another provisioner process.")
	flag.StringVar(&o.classContentURLs, "class-content-urls", "", "Content services of classes run by other processes, as class=https://url,... (default: --content-url).")
	flag.StringVar(&o.catalogContentURL, "catalog-content-url", "", "Content service (https) that serves Catalogs, read to resolve BundleDeployments' catalog sources (default: --content-url).")
	flag.Int64Var(&o.maxCatalogPackage, "max-catalog-package-bytes", catalogsource.DefaultMaxPackageBytes, "Largest package document of a catalog read to resolve a catalog source.")
	flag.StringVar(&o.contentAudience, "content-audience", storage.DefaultContentAudience, "Audience of the tokens the content server accepts and the downloader sends.")
	flag.StringVar(&o.tokenFile, "token-file", storage.ContentTokenPath, "Projected service account token of --content-audience, sent when downloading content from another provisioner process.")
	flag.IntVar(&o.bundleWorkers, "bundle-workers", 4, "Bundles of one class reconciled at once; fetches run in the background and do not hold a worker.")
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Metrics endpoint address (HTTPS; only bearer tokens the API server authenticates and authorizes to get /metrics, e.g. of a ServiceAccount bound to rukpak-metrics-reader); 0 disables it.")
	flag.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "Directory of the metrics endpoint's tls.crt and tls.key, re-read when they change; empty (or no files there): a self-signed certificate generated at start.")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Health and readiness probe address.")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader, so only one replica reconciles.")
	flag.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address of the pprof endpoints (e.g. 127.0.0.1:6060); empty disables them.")
	flag.StringVar(&o.leaderElectionID, "leader-election-id", "provisioner.core.rukpak.io", "Name of the leader election Lease.")
	o.limits.BindFlags(flag.CommandLine)
	o.catalogLimits.BindFlags(flag.CommandLine)
	decodeLimits := plain.DefaultLimits
	decodeLimits.BindFlags(flag.CommandLine)
	o.preflight.BindFlags(flag.CommandLine)
	flag.StringVar(&o.crdCheckRole, "crd-check-cluster-role", "rukpak-webhook-crd-check", "ClusterRole this process keeps granting list on the resources of every CRD a BundleDeployment owns, which the shipped ClusterRoleBinding of that name binds to the webhook's ServiceAccount: the webhook's check of hand edits of those CRDs reads their objects with it. Empty: not written.")
	renderLimits, renderLanes := helm.DefaultSandboxLimits, helm.DefaultRenderLanes
	renderLimits.BindFlags(flag.CommandLine)
	renderLanes.BindFlags(flag.CommandLine)
	flag.DurationVar(&o.certValidity, "webhook-cert-validity", servingcert.DefaultValidity, "Validity of the serving certificates (and their CAs) issued for the webhooks installed bundles declare.")
	flag.DurationVar(&o.certRenewBefore, "webhook-cert-renew-before", servingcert.DefaultRenewBefore, "How long before expiry those certificates are renewed; shorter than --webhook-cert-validity.")
	flag.DurationVar(&o.retryBase, "install-retry-base", bundledeployment.DefaultRetryBase, "Wait before the first retry of a failing install; each next retry waits twice as long, up to --install-retry-max. A change of the BundleDeployment, its Bundle, the values it reads or a new CRD of a kind it misses retries at once.")
	flag.DurationVar(&o.retryMax, "install-retry-max", bundledeployment.DefaultRetryMax, "Longest wait between retries of a failing install.")
	flag.Int64Var(&o.maxReleaseBytes, "max-release-bytes", release.DefaultMaxRecordBytes, "Largest release record (JSON, about the size of the installed manifests) of one BundleDeployment revision; records over 1 MiB are split across Secrets.")
	flag.Int64Var(&o.objectCacheBytes, "object-cache-bytes", memo.DefaultMaxBytes, "Bytes of decoded objects kept (as compact JSON) for the next reconcile of the same Bundle content, class and spec.config (so an unchanged BundleDeployment is not loaded and decoded again); an entry over a quarter of this is used once and not kept; 0 keeps none.")
	flag.StringVar(&o.defaultSA, "default-service-account", "", "NAMESPACE/NAME of the ServiceAccount that BundleDeployments without spec.serviceAccount install as (impersonated, after a permission check), as Flux's --default-service-account; empty: they install as the provisioner, unless --require-service-account.")
	flag.BoolVar(&o.requireSA, "require-service-account", false, "Refuse BundleDeployments that name no spec.serviceAccount when there is no --default-service-account, instead of installing them with the provisioner's own rights.")
	flag.StringVar(&o.watchSelector, "watch-label-selector", "", "Reconcile only the Bundles and BundleDeployments this label selector matches (e.g. '"+shard.Label+" in (shard1)', or '!"+shard.Label+"' for the main instance), as Flux's flag of this name: several provisioner Deployments, each with its own selector, --leader-election-id, --content-url and --content-cert-secret, split the cluster between them. Bundles a BundleDeployment generates get its values of the selector's label keys. Empty: everything.")
	flag.StringVar(&o.knownShards, "known-shards", "", "On the main instance (--watch-label-selector='!"+shard.Label+"'), the comma-separated values of "+shard.Label+" the other instances serve: Bundles and BundleDeployments labelled with any other value, which nobody reconciles, get the condition reason UnknownShard (Installed on BundleDeployments, Unpacked on Bundles) and are otherwise left alone. Empty: not reported.")
	flag.StringVar(&o.uploadDir, "upload-dir", "", "Directory of the archives uploaded for Bundles of source type upload (default: <--storage-dir>/uploads).")
	flag.IntVar(&o.maxUploads, "max-concurrent-uploads", upload.DefaultMaxConcurrent, "Most uploads (PUT /uploads/<bundle>.tgz) read at once; more are answered 503 with Retry-After.")
	flag.DurationVar(&o.uploadTimeout, "upload-timeout", 0, "Deadline of one upload, first byte to last (default: --fetch-timeout).")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	o.preflight.Resolve()
	// Validate, Files and Objects read the package defaults: every class and
	// the loader decode with the same bounds.
	plain.DefaultLimits = decodeLimits.OrDefault()
	// Every render (installs, upgrades, previews) takes the package's
	// defaults; set them before anything renders.
	helm.DefaultSandboxLimits = renderLimits.OrDefault()
	helm.SetRenderLanes(renderLanes)
	// Lazily: every reconcile's logger carries its request, which zap would
	// encode at once though most reconciles log nothing.
	ctrl.SetLogger(lazylog.New(zap.New(zap.UseFlagOptions(&zapOpts))))

	// The Go memory limit from the container's (the Deployment passes
	// limits.memory), less what the runtime does not count.
	if msg, err := memlimit.Set(); err != nil {
		ctrl.Log.Error(err, "setting the memory limit")
		os.Exit(1)
	} else if msg != "" {
		ctrl.Log.WithName("provisioner").Info(msg)
	}

	if err := run(ctrl.SetupSignalHandler(), o); err != nil {
		ctrl.Log.Error(err, "provisioner failed")
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	log := ctrl.Log.WithName("provisioner")
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, rukpakv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	// First: a selector that does not parse fails the start with its own
	// message, before any cluster access that could fail first.
	sh, err := shard.Parse(o.watchSelector)
	if err != nil {
		return fmt.Errorf("--watch-label-selector: %w", err)
	}
	known := knownShards(o.knownShards)
	if len(known) > 0 {
		if _, err := sh.Unserved(known); err != nil {
			return fmt.Errorf("--known-shards: %w", err)
		}
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	var defaultSA *identity.ServiceAccount
	if o.defaultSA != "" {
		sa, err := identity.Parse(o.defaultSA)
		if err != nil {
			return fmt.Errorf("--default-service-account: %w", err)
		}
		defaultSA = &sa
	}
	byObject := map[client.Object]cache.ByObject{
		// Watched only to wake Bundles waiting for a ConfigMap; unpacks
		// read ConfigMaps from the API server. Names only, not content.
		&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{o.namespace: {}}, Transform: configmaps.StripContent},
	}
	for obj, by := range sh.ByObject() {
		byObject[obj] = by
	}
	// Metadata answers (watches, lists, applies) arrive without managed
	// fields: every cache transform drops them anyway. Release records and
	// Helm keep the plain config: Helm's child renderer is handed it.
	mgr, err := ctrl.NewManager(leanmeta.Config(cfg), manager.Options{
		Scheme:                        scheme,
		Metrics:                       securemetrics.Options(o.metricsAddr, o.metricsCertDir),
		HealthProbeBindAddress:        o.probeAddr,
		PprofBindAddress:              o.pprofAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              o.leaderElectionID,
		LeaderElectionNamespace:       o.namespace,
		LeaderElectionReleaseOnCancel: true,
		// Every request of the manager's client maps its object's kind
		// (a metadata request each time): remembered, a map lookup
		// instead of two errors per API group of the cluster, ~9 KB with
		// a fleet's CRD groups.
		MapperProvider: func(c *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
			m, err := apiutil.NewDynamicRESTMapper(c, hc)
			if err != nil {
				return nil, err
			}
			return memomapper.New(m, 0), nil
		},
		// ConfigMap sources live in the provisioner's namespace only; caching
		// every ConfigMap of the cluster would cost memory for nothing.
		Cache: cache.Options{
			ByObject:         byObject,
			DefaultTransform: provisioner.CacheTransform(),
		},
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	limits := o.limits.OrDefault()
	store := &storage.LocalDirectory{RootDirectory: o.storageDir, BaseURL: strings.TrimSuffix(o.contentURL, "/"), Limits: limits}
	if err := os.MkdirAll(o.storageDir, 0o755); err != nil {
		return fmt.Errorf("creating storage directory: %w", err)
	}
	if err := store.RemoveStaleTempFiles(time.Minute); err != nil {
		log.Error(err, "removing stale temporary files")
	}
	var caPEM []byte
	if o.contentCAFile != "" {
		if caPEM, err = os.ReadFile(o.contentCAFile); err != nil {
			return fmt.Errorf("reading --content-ca-file: %w", err)
		}
	}
	httpClient, err := storage.NewHTTPClient(caPEM)
	if err != nil {
		return err
	}
	loader, err := storage.NewFallbackLoader(store, o.contentURL, httpClient, storage.TokenFromFile(o.tokenFile))
	if err != nil {
		return fmt.Errorf("--content-url: %w", err)
	}
	loader.Audience = o.contentAudience
	loader.Limits = limits
	if loader.ClassBaseURLs, err = classURLs(o.classContentURLs); err != nil {
		return err
	}

	catalogURL := o.catalogContentURL
	if catalogURL == "" {
		catalogURL = o.contentURL
	}
	if err := storage.CheckContentURL(catalogURL); err != nil {
		return fmt.Errorf("--catalog-content-url: %w", err)
	}
	catalogReader := &storage.CatalogClient{BaseURL: catalogURL, Client: httpClient, Token: storage.TokenFromFile(o.tokenFile), Audience: o.contentAudience}

	// Catalogs are one per cluster, not sharded: the instance that is not
	// a shard of several (no selector, or the main instance) serves them.
	var catalogs *storage.CatalogStore
	if sh == nil || len(known) > 0 {
		catalogs = &storage.CatalogStore{RootDirectory: o.storageDir, BaseURL: strings.TrimSuffix(o.contentURL, "/")}
		if err := catalogs.RemoveStaleStaging(time.Minute); err != nil {
			log.Error(err, "removing stale catalog staging directories")
		}
		// The catalogs this process serves are read where they are
		// stored; the other shards read them over HTTPS.
		catalogReader.Local = catalogs
	}

	classes := strings.Split(o.classes, ",")
	unpacker := sources.New(unpack.Config{
		// Secrets and ConfigMaps are read straight from the API server:
		// caching every Secret in the namespace is not worth the memory.
		Reader:    mgr.GetAPIReader(),
		Namespace: o.namespace,
		BaseDir:   o.unpackDir,
		Limits:    limits,
	})
	uploads, err := setupUploads(mgr, o, limits, classes, sh, unpacker)
	if err != nil {
		return err
	}
	if err := provisioner.Setup(mgr, provisioner.Options{
		RESTConfig:             cfg,
		Classes:                classes,
		Namespace:              o.namespace,
		Unpacker:               unpacker,
		Storage:                store,
		Loader:                 loader,
		FetchTimeout:           limits.FetchTimeout,
		BundleWorkers:          o.bundleWorkers,
		MaxReleaseBytes:        o.maxReleaseBytes,
		CertValidity:           o.certValidity,
		CertRenewBefore:        o.certRenewBefore,
		DefaultServiceAccount:  defaultSA,
		RequireServiceAccount:  o.requireSA,
		Shard:                  sh,
		KnownShards:            known,
		Preflight:              o.preflight,
		CRDCheckClusterRole:    o.crdCheckRole,
		RetryBase:              o.retryBase,
		RetryMax:               o.retryMax,
		Catalogs:               catalogs,
		CatalogLimits:          o.catalogLimits,
		CatalogReader:          catalogReader,
		MaxCatalogPackageBytes: o.maxCatalogPackage,
		ObjectCacheBytes:       objectCacheBytes(o.objectCacheBytes),
	}); err != nil {
		return err
	}

	authn, authz, err := storage.NewDelegatingAuth(mgr.GetConfig(), []string{o.contentAudience})
	if err != nil {
		return fmt.Errorf("creating content handler: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(storage.BundlesPath, storage.WithAuth(storage.NewFileHandler(o.storageDir), authn, authz, log.WithName("content")))
	// Served by every instance that has a storage directory: a catalog
	// another instance serves is a 404 here.
	mux.Handle(storage.CatalogsPath, storage.WithAuth(storage.NewCatalogHandler(&storage.CatalogStore{RootDirectory: o.storageDir}), authn, authz, log.WithName("content")))
	var content http.Handler = mux
	// certsReady is closed once the content server's certificate files are
	// there; the server and readiness wait for it.
	certsReady := closedChan()
	if o.contentCertSecret != "" {
		if o.tlsCertFile != "" {
			return errors.New("--content-cert-secret and --tls-cert-file exclude each other")
		}
		host, err := contentHost(o.contentURL)
		if err != nil {
			return err
		}
		if certsReady, err = certs.AddSelfManaged(ctx, mgr, certs.Options{
			Namespace:             o.namespace,
			SecretName:            o.contentCertSecret,
			DNSName:               host,
			ExtraDNSNames:         []string{host + ".cluster.local"},
			CertDir:               o.contentCertDir,
			RequireLeaderElection: o.leaderElect,
			ControllerName:        "rukpak-content-cert-rotator",
			CAName:                "rukpak-content-ca",
		}); err != nil {
			return fmt.Errorf("self-managed content certificate: %w", err)
		}
		o.tlsCertFile = filepath.Join(o.contentCertDir, certs.CertFile)
		o.tlsKeyFile = filepath.Join(o.contentCertDir, certs.KeyFile)
	}
	// What a burst of installs left free goes back to the system once the
	// process is idle again, so its footprint follows its live heap.
	if err := mgr.Add(idlemem.Default()); err != nil {
		return err
	}
	// A generated certificate exists, and its CA is in --tls-ca-out, before
	// the process reports ready: clients that start on readiness trust it.
	if o.tlsCertFile == "" {
		cert, err := selfSignedContentCert(o)
		if err != nil {
			return err
		}
		o.selfSignedCert = &cert
	}
	// The content server runs on every replica, leader or not (a bare
	// RunnableFunc would run on the leader only): a Bundle's contentURL must
	// keep working whichever replica a Service picks.
	if err := mgr.Add(certs.AfterReady(certsReady, manager.RunnableFunc(func(ctx context.Context) error {
		srv, err := contentServer(ctx, o, content, uploads)
		if err != nil {
			return err
		}
		go func() {
			<-ctx.Done()
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdown)
		}()
		log.Info("serving bundle content", "address", o.contentAddr, "url", o.contentURL)
		if err := srv.ListenAndServeTLS("", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("content server: %w", err)
		}
		return nil
	}))); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", certs.ReadyChecker(certsReady)); err != nil {
		return err
	}
	log.Info("starting", "classes", classes, "namespace", o.namespace, "watchLabelSelector", sh.String(), "leaderElectionID", o.leaderElectionID)
	return mgr.Start(ctx)
}

// contentHost is the host name of the content URL, which the serving
// certificate must name.
func contentHost(contentURL string) (string, error) {
	u, err := url.Parse(contentURL)
	if err != nil || u.Hostname() == "" {
		return "", fmt.Errorf("--content-url %q has no host", contentURL)
	}
	return u.Hostname(), nil
}

func closedChan() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

func contentServer(ctx context.Context, o options, h, uploads http.Handler) (*http.Server, error) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if o.tlsCertFile != "" {
		// Re-read on change: rotated certificates are served without a
		// restart.
		w, err := certwatcher.New(o.tlsCertFile, o.tlsKeyFile)
		if err != nil {
			return nil, fmt.Errorf("loading content server certificate: %w", err)
		}
		go func() { _ = w.Start(ctx) }()
		tlsCfg.GetCertificate = w.GetCertificate
	} else {
		tlsCfg.Certificates = []tls.Certificate{*o.selfSignedCert}
	}
	if uploads != nil {
		mux := http.NewServeMux()
		mux.Handle("/", h)
		mux.Handle(upload.Path, uploads)
		h = mux
	}
	return &http.Server{
		Addr:              o.contentAddr,
		Handler:           h,
		TLSConfig:         tlsCfg,
		ReadHeaderTimeout: 10 * time.Second,
	}, nil
}

// selfSignedContentCert generates the content server's certificate when
// none is configured, and writes its CA to --tls-ca-out.
func selfSignedContentCert(o options) (tls.Certificate, error) {
	host, err := contentHost(o.contentURL)
	if err != nil {
		host = "localhost"
	}
	pair, err := selfsigned.New([]string{host, "localhost", "127.0.0.1"}, 365*24*time.Hour)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generating the content server certificate: %w", err)
	}
	cert, err := pair.TLSCertificate()
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generating the content server certificate: %w", err)
	}
	if o.tlsCAOut != "" {
		if err := os.MkdirAll(filepath.Dir(o.tlsCAOut), 0o755); err != nil {
			return tls.Certificate{}, fmt.Errorf("writing --tls-ca-out: %w", err)
		}
		if err := os.WriteFile(o.tlsCAOut, pair.CAPEM, 0o644); err != nil {
			return tls.Certificate{}, fmt.Errorf("writing --tls-ca-out: %w", err)
		}
	}
	return cert, nil
}

// classURLs parses --class-content-urls.
func classURLs(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		class, u, ok := strings.Cut(kv, "=")
		if !ok || class == "" {
			return nil, fmt.Errorf("--class-content-urls: %q is not class=url", kv)
		}
		if err := storage.CheckContentURL(u); err != nil {
			return nil, fmt.Errorf("--class-content-urls: %w", err)
		}
		out[class] = u
	}
	return out, nil
}

// knownShards splits --known-shards.
func knownShards(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// objectCacheBytes is --object-cache-bytes as provisioner.Options takes it,
// where 0 means the default: a flag of 0 keeps nothing.
func objectCacheBytes(flagValue int64) int64 {
	if flagValue <= 0 {
		return -1
	}
	return flagValue
}
