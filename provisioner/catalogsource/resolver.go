// Package catalogsource resolves a BundleDeployment template's catalog
// source to a bundle: it reads the requested package of every selected,
// serving Catalog from the content service that serves it, keeps the
// indexes built from them in a bounded cache keyed by the catalog's
// content digest, and runs catalog/resolve over them.
package catalogsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/semaphore"
	"golang.org/x/sync/singleflight"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/catalog/fbc"
	"github.com/rukpak-dev/rukpak/catalog/resolve"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
)

// Opener opens the document of package pkg of catalog name as the content
// service serves it (storage.CatalogClient). A package the catalog does not
// have is an error wrapping fs.ErrNotExist.
type Opener interface {
	OpenPackage(ctx context.Context, name, pkg string) (io.ReadCloser, error)
}

// DefaultTimeout bounds reading one catalog's package.
const DefaultTimeout = time.Minute

// DefaultMaxPackageBytes bounds one package document read: a package's
// lines carry its bundles' manifests (olm.bundle.object), the largest real
// package of the shared test data (infinispan) is ~6 MB.
const DefaultMaxPackageBytes = 32 << 20

// building lets one index be built at a time in the process: a build holds
// its package document as parsed (up to MaxPackageBytes) and an index of up
// to resolve.MaxIndexBytes, which four workers building hostile packages
// at once would hold four times. A build of the largest real package takes
// tens of milliseconds; one of the largest allowed, about a second.
var building = semaphore.NewWeighted(1)

// Resolver resolves catalog sources. Safe for concurrent use.
type Resolver struct {
	// Catalogs lists Catalogs (the manager's cached client).
	Catalogs client.Reader
	// Opener reads package documents; nil: catalog sources fail with a
	// message saying this provisioner reads no catalogs.
	Opener Opener
	// MaxPackageBytes bounds one package document (0:
	// DefaultMaxPackageBytes); Timeout one read (0: DefaultTimeout).
	MaxPackageBytes int64
	Timeout         time.Duration
	// Cache keeps built indexes; nil keeps none.
	Cache *Cache

	// builds shares one build among the resolutions that need the same
	// index at once.
	builds singleflight.Group
}

// TransientError is a failure that may pass on a retry: the content
// service did not answer, or answered with an error. Every other error of
// Resolve stays until a Catalog or the BundleDeployment changes.
type TransientError struct{ Err error }

func (e *TransientError) Error() string { return e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

// Resolve picks the bundle src asks for among the Catalogs its selector
// matches that are Serving, after installed (nil: nothing installed).
func (r *Resolver) Resolve(ctx context.Context, src *rukpakv1alpha1.CatalogSource, installed *resolve.Installed) (*resolve.Result, error) {
	req := resolve.Request{
		PackageName:  src.PackageName,
		Channels:     src.Channels,
		VersionRange: src.Version,
		Policy:       resolve.Policy(src.UpgradeConstraintPolicy),
		Installed:    installed,
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	catalogs, err := r.catalogs(ctx, src)
	if err != nil {
		return nil, err
	}
	return resolve.Resolve(req, catalogs)
}

// InstalledByImage finds, in the Catalogs src selects, the bundle of src's
// package whose image is image: what a Bundle resolved from src installed,
// when status.catalog.installed does not say it (lost with a status write).
// nil when no selected catalog names the image.
func (r *Resolver) InstalledByImage(ctx context.Context, src *rukpakv1alpha1.CatalogSource, image string) (*resolve.Installed, error) {
	catalogs, err := r.catalogs(ctx, src)
	if err != nil {
		return nil, err
	}
	for _, c := range catalogs {
		if in, ok := c.Index.BundleByImage(src.PackageName, image); ok {
			return &in, nil
		}
	}
	return nil, nil
}

// catalogs are the indexes of src's package in the serving Catalogs src's
// selector matches, in name order.
func (r *Resolver) catalogs(ctx context.Context, src *rukpakv1alpha1.CatalogSource) ([]resolve.Catalog, error) {
	if r.Opener == nil {
		return nil, errors.New("this provisioner is not configured to read catalogs (no catalog content service)")
	}
	sel := labels.Everything()
	if src.Selector != nil {
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(src.Selector); err != nil {
			return nil, &resolve.RequestError{Field: "selector", Message: err.Error()}
		}
	}
	list := &rukpakv1alpha1.CatalogList{}
	if err := r.Catalogs.List(ctx, list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, &TransientError{fmt.Errorf("listing catalogs: %w", err)}
	}
	if len(list.Items) == 0 {
		if src.Selector == nil {
			return nil, errors.New("there are no Catalogs in the cluster")
		}
		return nil, fmt.Errorf("no Catalog matches selector %q", sel.String())
	}
	var catalogs []resolve.Catalog
	var notServing []string
	for i := range list.Items {
		c := &list.Items[i]
		if !conditions.Is(c.Status.Conditions, rukpakv1alpha1.TypeServing, metav1.ConditionTrue) || c.Status.ContentDigest == "" {
			notServing = append(notServing, c.Name)
			continue
		}
		idx, err := r.index(ctx, c.Name, c.Status.ContentDigest, src.PackageName)
		if err != nil {
			return nil, err
		}
		catalogs = append(catalogs, resolve.Catalog{Name: c.Name, Priority: c.Spec.Priority, Index: idx})
	}
	if len(catalogs) == 0 {
		slices.Sort(notServing)
		return nil, fmt.Errorf("no Catalog that matches selector %q is serving (not serving: %s)", sel.String(), strings.Join(notServing, ", "))
	}
	// Catalogs in name order: a resolution error lists them the same way
	// every time, so its message (a condition) does not flap.
	slices.SortFunc(catalogs, func(a, b resolve.Catalog) int { return strings.Compare(a.Name, b.Name) })
	return catalogs, nil
}

// index returns the index of package pkg of catalog name whose content has
// digest, from the cache or read from the content service.
func (r *Resolver) index(ctx context.Context, name, digest, pkg string) (*resolve.Index, error) {
	key := Key{Catalog: name, Digest: digest, Package: pkg}
	if idx, ok := r.Cache.Get(key); ok {
		return idx, nil
	}
	v, err, _ := r.builds.Do(name+"\x00"+digest+"\x00"+pkg, func() (any, error) {
		if err := building.Acquire(ctx, 1); err != nil {
			return nil, &TransientError{fmt.Errorf("waiting to read package %q of catalog %q: %w", pkg, name, err)}
		}
		defer building.Release(1)
		if idx, ok := r.Cache.Get(key); ok {
			return idx, nil
		}
		return r.build(ctx, key)
	})
	if err != nil {
		return nil, err
	}
	return v.(*resolve.Index), nil
}

// build reads and indexes key's package, and keeps the index in the cache
// charged at the larger of its document's size and its own estimate.
func (r *Resolver) build(ctx context.Context, key Key) (*resolve.Index, error) {
	name, pkg := key.Catalog, key.Package
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	limit := r.MaxPackageBytes
	if limit <= 0 {
		limit = DefaultMaxPackageBytes
	}
	body, err := r.Opener.OpenPackage(ctx, name, pkg)
	if errors.Is(err, fs.ErrNotExist) {
		// The catalog has no such package: an empty index says so in
		// the resolution's per-catalog counts.
		idx, err := resolve.NewIndex(resolve.Content{})
		if err == nil {
			r.Cache.Add(key, idx, 0)
		}
		return idx, err
	}
	if err != nil {
		return nil, &TransientError{fmt.Errorf("reading package %q of catalog %q: %w", pkg, name, err)}
	}
	defer body.Close()
	cr := &countingReader{r: body}
	p, err := fbc.ParsePackage(cr, pkg, limit)
	if err != nil {
		if ctx.Err() != nil {
			return nil, &TransientError{fmt.Errorf("reading package %q of catalog %q: %w (after %s)", pkg, name, ctx.Err(), timeout)}
		}
		return nil, fmt.Errorf("reading package %q of catalog %q: %w", pkg, name, err)
	}
	idx, err := resolve.NewIndex(resolve.FromPackages(p))
	if err != nil {
		return nil, fmt.Errorf("package %q of catalog %q: %w", pkg, name, err)
	}
	r.Cache.Add(key, idx, max(cr.n, idx.Size()))
	return idx, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
