// Package provisioner wires the shared Bundle and BundleDeployment
// reconcilers to the bundle formats of each provisioner class.
package provisioner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/catalog/fbc"
	"github.com/rukpak-dev/rukpak/internal/crdupgrade"
	"github.com/rukpak-dev/rukpak/internal/leanmeta"
	"github.com/rukpak-dev/rukpak/provisioner/bundle"
	"github.com/rukpak-dev/rukpak/provisioner/bundledeployment"
	"github.com/rukpak-dev/rukpak/provisioner/catalog"
	"github.com/rukpak-dev/rukpak/provisioner/catalogsource"
	"github.com/rukpak-dev/rukpak/provisioner/crdaccess"
	"github.com/rukpak-dev/rukpak/provisioner/helm"
	"github.com/rukpak-dev/rukpak/provisioner/helm/install"
	"github.com/rukpak-dev/rukpak/provisioner/identity"
	"github.com/rukpak-dev/rukpak/provisioner/memo"
	"github.com/rukpak-dev/rukpak/provisioner/metrics"
	"github.com/rukpak-dev/rukpak/provisioner/plain"
	"github.com/rukpak-dev/rukpak/provisioner/registry"
	"github.com/rukpak-dev/rukpak/provisioner/release"
	"github.com/rukpak-dev/rukpak/provisioner/servingcert"
	"github.com/rukpak-dev/rukpak/provisioner/shard"
	"github.com/rukpak-dev/rukpak/provisioner/unserved"
	"github.com/rukpak-dev/rukpak/storage"
	"github.com/rukpak-dev/rukpak/unpack"
)

// Options configure the provisioners of one process.
type Options struct {
	// Classes to run, e.g. core-rukpak-io-plain and core-rukpak-io-registry.
	Classes []string
	// Namespace holds Helm release records and objects installed without a
	// namespace.
	Namespace string
	Unpacker  unpack.Unpacker
	Storage   storage.Storage
	// Loader loads content for installs; it may fall back to downloading
	// content stored by another process. Defaults to Storage.
	Loader storage.Loader
	// FetchTimeout bounds one unpack of a Bundle's source; BundleWorkers is
	// how many Bundles of a class reconcile at once (bundle.Reconciler).
	FetchTimeout  time.Duration
	BundleWorkers int
	// UnpackingGrace is how long a fetch runs before its Bundle is shown
	// Unpacking (bundle.Reconciler); 0 means its default.
	UnpackingGrace time.Duration
	// MaxReleaseBytes bounds one release revision's record; 0 means
	// release.DefaultMaxRecordBytes.
	MaxReleaseBytes int64
	// DefaultServiceAccount is the identity BundleDeployments without
	// spec.serviceAccount install as; without one, RequireServiceAccount
	// refuses them, else they install as the provisioner.
	DefaultServiceAccount *identity.ServiceAccount
	RequireServiceAccount bool
	// CertValidity and CertRenewBefore tune the serving certificates issued
	// for installed webhooks; zero means servingcert's defaults.
	CertValidity    time.Duration
	CertRenewBefore time.Duration
	// Shard, when set, is the part of the cluster's Bundles and
	// BundleDeployments this process reconciles; the manager's cache must
	// hold only that part (Shard.ByObject).
	Shard *shard.Shard
	// KnownShards, on the main instance (Shard !core.rukpak.io/shard), are
	// the shards other instances serve: objects labelled for any other get
	// an UnknownShard condition (package unserved).
	KnownShards []string
	// Preflight bounds the CRD upgrade preflight (zero: its defaults).
	Preflight crdupgrade.Options
	// CRDCheckClusterRole, when set, is the ClusterRole kept granting list
	// on the resources of release-owned CRDs, for the webhook's check of
	// hand edits of them (package crdaccess).
	CRDCheckClusterRole string
	// RetryBase and RetryMax shape the backoff of failing installs: the
	// first retry after RetryBase, each next one after twice as long, up
	// to RetryMax (zero: bundledeployment's defaults).
	RetryBase, RetryMax time.Duration
	// UnhealthyRecheck is how soon an unhealthy BundleDeployment is first
	// judged again without an event; each next recheck that finds the
	// same objects unhealthy waits twice as long, up to RetryMax (zero:
	// bundledeployment.DefaultUnhealthyRecheck).
	UnhealthyRecheck time.Duration
	// Catalogs, when set, stores and serves Catalogs: this process runs the
	// Catalog reconciler (one process per cluster should).
	Catalogs *storage.CatalogStore
	// CatalogLimits bound reading one catalog (zero: fbc's defaults).
	CatalogLimits fbc.Limits
	// CatalogReader, when set, reads Catalogs' packages from the content
	// service that serves them (storage.CatalogClient), so that
	// BundleDeployments may install from catalog sources.
	CatalogReader catalogsource.Opener
	// MaxCatalogPackageBytes bounds one package document read (0:
	// catalogsource.DefaultMaxPackageBytes).
	MaxCatalogPackageBytes int64
	// ObjectCacheBytes bounds the objects decoded from Bundles' content
	// kept for the next reconcile of the same content and config (package
	// memo); 0 means memo.DefaultMaxBytes, less than 0 keeps none.
	ObjectCacheBytes int64
	// RESTConfig is the API server's config for release records and Helm,
	// without the manager's transport wrappers (Helm's child renderer
	// cannot be handed those); nil means the manager's, which must then
	// not be a leanmeta one.
	RESTConfig *rest.Config
}

// Setup registers a Bundle and a BundleDeployment reconciler for every class.
func Setup(mgr ctrl.Manager, opts Options) error {
	if opts.Loader == nil {
		opts.Loader = opts.Storage
	}
	cfg := opts.RESTConfig
	if cfg == nil {
		cfg = mgr.GetConfig()
		if leanmeta.Wrapped(cfg) {
			// Helm's child renderer refuses such a config: every chart
			// would fail to render.
			return errors.New("provisioner options: RESTConfig is required when the manager's config drops managed fields (leanmeta)")
		}
	}
	releases, err := release.NewManager(cfg, opts.Namespace, release.WithMaxRecordBytes(opts.MaxReleaseBytes))
	if err != nil {
		return err
	}
	// Its index of release records: histories read by name, not listed.
	if err := releases.AddTo(mgr); err != nil {
		return err
	}
	ident, err := newIdentity(mgr, releases, opts)
	if err != nil {
		return err
	}
	lister, err := crdupgrade.NewRESTLister(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return err
	}
	preflight := &crdupgrade.Preflight{
		// The release manager's own client: live reads, its metadata
		// reads lean (leanclient), as the ownership checks'.
		CRDs: releases.Client(), Objects: lister, Options: opts.Preflight,
		Digest: func(crd *unstructured.Unstructured) [32]byte {
			return memo.Digest([]*unstructured.Unstructured{crd})
		},
		Compared: func() { metrics.Step(metrics.StepPreflight) },
	}
	namespaces, err := newNamespaceOwners(mgr)
	if err != nil {
		return err
	}
	prepare := prepareObjects(&servingcert.Issuer{Reader: mgr.GetAPIReader(), Validity: opts.CertValidity, RenewBefore: opts.CertRenewBefore}, opts.Namespace)
	cacheBytes := opts.ObjectCacheBytes
	if cacheBytes == 0 {
		cacheBytes = memo.DefaultMaxBytes
	}
	// One cache for every class: its bound is the process's.
	objectCache := memo.New(cacheBytes)
	var contentURL func(context.Context, *rukpakv1alpha1.Bundle) (string, error)
	if opts.Storage != nil {
		contentURL = opts.Storage.URLFor
	}
	var catalogs bundledeployment.CatalogResolver
	if opts.CatalogReader != nil {
		// One cache of catalog indexes for every class.
		catalogs = &catalogsource.Resolver{
			Catalogs: mgr.GetClient(), Opener: opts.CatalogReader,
			MaxPackageBytes: opts.MaxCatalogPackageBytes, Timeout: opts.FetchTimeout,
			Cache: catalogsource.NewCache(catalogsource.DefaultCacheBytes),
		}
	}
	installed, err := bundledeployment.NewInstalledCache(mgr)
	if err != nil {
		return err
	}
	// A CRD being established is read once the cache shows it changed,
	// not on a timer.
	if err := releases.WatchCRDsIn(context.Background(), installed); err != nil {
		return err
	}
	for _, class := range opts.Classes {
		h, err := HandlerFor(class)
		if err != nil {
			return err
		}
		br := &bundle.Reconciler{
			Client:   mgr.GetClient(),
			Class:    class,
			Unpacker: opts.Unpacker,
			Storage:  opts.Storage,
			Handler:  h,

			FetchTimeout:   opts.FetchTimeout,
			Workers:        opts.BundleWorkers,
			UnpackingGrace: opts.UnpackingGrace,
		}
		if class != rukpakv1alpha1.ProvisionerClassHelm {
			br.Stored = primeObjects(objectCache)
		}
		if err := br.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up bundle controller for %s: %w", class, err)
		}
		if err := (&bundle.ReplicaCache{Reconciler: br}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up bundle replica cache for %s: %w", class, err)
		}
		var objs bundledeployment.ObjectsFunc = decodeObjects
		settle := (&objects{reader: namespaces}).settle
		var installer bundledeployment.Installer
		if class == rukpakv1alpha1.ProvisionerClassHelm {
			// Helm's action library renders and installs charts.
			objs, settle = nil, nil
			installer = &install.Installer{Releases: releases, Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Class: class}
		}
		if err := (&bundledeployment.Reconciler{
			// This process unpacks the Bundles of its classes.
			BundleClasses: opts.Classes,

			Client:      mgr.GetClient(),
			Class:       class,
			Installed:   installed,
			Loader:      opts.Loader,
			Objects:     objs,
			ObjectsName: decodeObjectsName,
			Settle:      settle,
			ObjectCache: objectCache,
			Releases:    releases,
			Installer:   installer,
			Explain:     explainDependencies,
			Preflight:   preflight,
			PodReader:   mgr.GetAPIReader(),
			Identity:    ident,
			Prepare:     prepare,

			Shard:        opts.Shard,
			BundleReader: mgr.GetAPIReader(),
			ContentURL:   contentURL,
			Catalogs:     catalogs,

			RetryBase: opts.RetryBase,
			RetryMax:  opts.RetryMax,

			UnhealthyRecheck: opts.UnhealthyRecheck,
		}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up bundle deployment controller for %s: %w", class, err)
		}
	}
	if opts.CRDCheckClusterRole != "" {
		if err := crdaccess.Setup(mgr, opts.CRDCheckClusterRole, installed); err != nil {
			return fmt.Errorf("setting up the webhook's access to release-owned CRDs: %w", err)
		}
	}
	if opts.Catalogs != nil {
		if err := (&catalog.Reconciler{
			Client:       mgr.GetClient(),
			Unpacker:     opts.Unpacker,
			Store:        opts.Catalogs,
			Limits:       opts.CatalogLimits,
			FetchTimeout: opts.FetchTimeout,
		}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up catalog controller: %w", err)
		}
	}
	if len(opts.KnownShards) > 0 {
		return unserved.Setup(mgr, opts.Shard, opts.KnownShards)
	}
	return nil
}

// HandlerFor returns the format handler of a provisioner class: plain+v0
// content is validated and stored as is; registry+v1 content is validated
// and converted to plain+v0 (keeping the original for re-rendering with a
// BundleDeployment's config).
func HandlerFor(class string) (bundle.Handler, error) {
	switch class {
	case rukpakv1alpha1.ProvisionerClassPlain:
		return bundle.HandlerFunc(func(_ context.Context, fsys fs.FS, _ *rukpakv1alpha1.Bundle) (fs.FS, error) {
			if err := plain.Validate(fsys); err != nil {
				return nil, err
			}
			return fsys, nil
		}), nil
	case rukpakv1alpha1.ProvisionerClassRegistry:
		return bundle.HandlerFunc(func(_ context.Context, fsys fs.FS, _ *rukpakv1alpha1.Bundle) (fs.FS, error) {
			return registry.Convert(fsys, registry.Options{})
		}), nil
	case rukpakv1alpha1.ProvisionerClassHelm:
		// Stored as the files Helm loaded, under helm.ChartDir, whatever
		// layout the source delivered; installs read it with helm.LoadChart.
		return bundle.HandlerFunc(func(_ context.Context, fsys fs.FS, _ *rukpakv1alpha1.Bundle) (fs.FS, error) {
			ch, err := helm.LoadChart(fsys)
			if err != nil {
				return nil, err
			}
			return helm.Content(ch), nil
		}), nil
	}
	return nil, fmt.Errorf("unknown provisioner class %q (known: %s, %s, %s)", class, rukpakv1alpha1.ProvisionerClassPlain, rukpakv1alpha1.ProvisionerClassRegistry, rukpakv1alpha1.ProvisionerClassHelm)
}

// primeObjects returns a bundle.Reconciler's Stored that hands the
// objects registry+v1 conversion rendered to the first install of the
// content just stored: an install without spec.config decodes exactly
// them from the stored files (plain.Decoded), so under the key its
// reconcile looks for (decodeObjectsName, no config, the archive's hash)
// it finds them and neither loads nor decodes anything. Under this process's
// classes but Helm's, BundleDeployments decode with decodeObjects
// whichever class made the Bundle (a plain BundleDeployment of a
// registry+v1 Bundle is the usual pair).
func primeObjects(cache *memo.Cache) func(context.Context, *rukpakv1alpha1.Bundle, fs.FS, [32]byte) {
	return func(_ context.Context, _ *rukpakv1alpha1.Bundle, content fs.FS, sum [32]byte) {
		d, ok := content.(plain.Decoded)
		if !ok {
			return
		}
		files, heap := d.TakeDecoded()
		if files == nil {
			return
		}
		data := make([][]byte, len(files))
		objs := make([]*unstructured.Unstructured, len(files))
		for i, f := range files {
			data[i] = f.Data
			objs[i] = &unstructured.Unstructured{Object: f.Object}
		}
		cache.Prime(memo.Key{Content: sum, Decoder: decodeObjectsName, Config: memo.ConfigKey(nil)}, data, objs, heap)
	}
}

// objects decides what a BundleDeployment installs, looking at the cluster
// where the content alone cannot tell.
type objects struct {
	reader client.Reader
}

// forDeployment is Objects, settled.
func (o *objects) forDeployment(ctx context.Context, fsys fs.FS, bd *rukpakv1alpha1.BundleDeployment) ([]*unstructured.Unstructured, error) {
	objs, err := Objects(fsys, bd)
	if err != nil {
		return nil, err
	}
	return o.settle(ctx, bd, objs)
}

// decodeObjectsName names decodeObjects in the object cache's keys.
const decodeObjectsName = "decodeObjects"

// decodeObjects is Objects as a bundledeployment.ObjectsFunc: a function of
// the content and spec.config only, so its results may be cached.
func decodeObjects(_ context.Context, fsys fs.FS, bd *rukpakv1alpha1.BundleDeployment) ([]*unstructured.Unstructured, error) {
	return Objects(fsys, bd)
}

// settle drops from objs the install namespaces the conversion synthesised
// that already exist and belong to someone else: those are used, not taken
// over, so uninstalling never deletes a namespace (and its workloads) this
// install did not create.
func (o *objects) settle(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	kept := objs[:0]
	for _, obj := range objs {
		if obj.GetKind() == "Namespace" && obj.GetAPIVersion() == "v1" && obj.GetAnnotations()[registry.AnnotationCreatedNamespace] == "true" {
			existing := namespaceMetadata()
			err := o.reader.Get(ctx, client.ObjectKey{Name: obj.GetName()}, existing)
			switch {
			case err == nil && existing.Labels[rukpakv1alpha1.LabelOwnerName] != bd.Name:
				continue
			case err != nil && !apierrors.IsNotFound(err):
				return nil, fmt.Errorf("checking install namespace %q: %w", obj.GetName(), err)
			}
		}
		kept = append(kept, obj)
	}
	return kept, nil
}

// Objects returns the objects a BundleDeployment installs from stored
// content: registry+v1 content is converted again when the BundleDeployment
// has a config (install and watch namespaces).
func Objects(fsys fs.FS, bd *rukpakv1alpha1.BundleDeployment) ([]*unstructured.Unstructured, error) {
	if registry.IsRegistryContent(fsys) && bd.Spec.Config != nil && len(bd.Spec.Config.Raw) > 0 {
		opts, err := registry.OptionsFromConfig(bd.Spec.Config.Raw)
		if err != nil {
			return nil, fmt.Errorf("spec.config: %w", err)
		}
		src, err := fs.Sub(fsys, registry.SourceDir)
		if err != nil {
			return nil, err
		}
		// Rendered straight to objects: the same objects as decoding
		// Convert's manifests (TestRenderEqualsDecodedConversion), without
		// writing YAML to parse it back.
		return registry.Objects(src, opts)
	}
	return plain.Objects(fsys)
}

// explainDependencies names a registry+v1 bundle's declared dependencies,
// the likely providers of kinds missing from the cluster.
func explainDependencies(fsys fs.FS) string {
	if !registry.IsRegistryContent(fsys) {
		return ""
	}
	src, err := fs.Sub(fsys, registry.SourceDir)
	if err != nil {
		return ""
	}
	deps, err := registry.Dependencies(src)
	if err != nil || len(deps) == 0 {
		return ""
	}
	return "the bundle declares dependencies: " + strings.Join(deps, ", ")
}
