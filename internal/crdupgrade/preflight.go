package crdupgrade

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/internal/liststream"
)

// Preflight checks the CRDs among a bundle's objects against the cluster
// before anything of the bundle is applied.
type Preflight struct {
	// CRDs reads the CRDs on the cluster. An uncached reader: a cache of
	// every CRD would hold megabytes of schemas for the rare upgrade.
	CRDs client.Reader
	// Objects lists custom resources (the dynamic client).
	Objects Lister
	Options Options
	// Digest, when set, digests a bundle's CRD so that a CRD which passed
	// against the same bundle CRD at the same live version is not compared
	// again; nil compares every time. The caller's, so that this package
	// (shared with the webhook) imports nothing of the provisioner's.
	Digest func(*unstructured.Unstructured) [32]byte
	// Compared, when set, is called once per comparison made (a metric).
	Compared func()

	// passed remembers, by CRD name, the live CRD (UID and
	// resourceVersion) and the bundle's CRD (digest) of the last
	// comparison that found nothing: with no change to compare, no custom
	// resource is read either, so the same pair passes again.
	mu     sync.Mutex
	passed map[string]passedCRD
}

// passedCRD is a comparison that found nothing: the live CRD's
// resourceVersion (the etcd revision of its last write, so a CRD deleted
// and created again has another) and the bundle CRD's digest.
type passedCRD struct {
	resourceVersion string
	next            [32]byte
}

// RunOptions are a caller's sources for one Run.
type RunOptions struct {
	// Metadata, when set, reads the live CRDs' metadata first (a cache of
	// them): one not there is read from CRDs.
	Metadata client.Reader
	// Same, when set, is given the bundle's CRDs that would be compared
	// and returns, by name, the resourceVersion of each whose live CRD it
	// found to hold every field the bundle's sets: applying such a CRD
	// changes nothing, so no stored object can break, and it passes
	// without being read whole and compared (after a restart, when no
	// pass is remembered, that is every CRD of every release). Its errors
	// leave every CRD to the comparison.
	Same func(ctx context.Context, crds []*unstructured.Unstructured) (map[string]string, error)
	// Digests, when not nil, receives by name the digest of each bundle
	// CRD (new ones too), for Passed after they are applied: the caller
	// may change the objects meanwhile (stamping them).
	Digests map[string][32]byte
}

// Run compares every CRD in objs that is already on the cluster and
// differs from it, and returns the reports of those with changes.
func (p *Preflight) Run(ctx context.Context, objs []*unstructured.Unstructured) ([]*Report, error) {
	return p.RunWith(ctx, objs, RunOptions{})
}

// pendingCRD is a bundle CRD to compare, and its digest.
type pendingCRD struct {
	crd    *unstructured.Unstructured
	digest [32]byte
}

// RunWith is Run with opts.
func (p *Preflight) RunWith(ctx context.Context, objs []*unstructured.Unstructured, opts RunOptions) ([]*Report, error) {
	var compare []pendingCRD
	conflicting := map[string]bool{}
	for _, o := range objs {
		if o.GroupVersionKind() != apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition") {
			continue
		}
		// The live CRD's metadata first: a new one has nothing to compare
		// with, and one that passed against the same bundle CRD at this
		// very version passes again without reading its schemas.
		meta, err := p.liveMetadata(ctx, o.GetName(), opts.Metadata)
		if err != nil {
			return nil, fmt.Errorf("reading CRD %s: %w", o.GetName(), err)
		}
		var digest [32]byte
		if p.Digest != nil && (meta != nil || opts.Digests != nil) {
			digest = p.Digest(o)
			if opts.Digests != nil {
				if d, seen := opts.Digests[o.GetName()]; seen && d != digest || conflicting[o.GetName()] {
					// Two different CRDs of one name: neither is what the
					// live one is known to be.
					delete(opts.Digests, o.GetName())
					conflicting[o.GetName()] = true
				} else {
					opts.Digests[o.GetName()] = digest
				}
			}
		}
		if meta == nil {
			p.remember(o.GetName(), nil)
			continue
		}
		if p.Digest != nil && p.passedBefore(o.GetName(), passedCRD{resourceVersion: meta.ResourceVersion, next: digest}) {
			continue
		}
		compare = append(compare, pendingCRD{o, digest})
	}
	if len(compare) > 0 && opts.Same != nil && p.Digest != nil {
		compare = p.withoutSame(ctx, compare, opts.Same)
	}
	var reports []*Report
	for _, c := range compare {
		o := c.crd
		// Converting its schema to the typed form costs several times its
		// size: only for a CRD that is compared.
		live := &apiextensionsv1.CustomResourceDefinition{}
		if err := p.CRDs.Get(ctx, client.ObjectKey{Name: o.GetName()}, live); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("reading CRD %s: %w", o.GetName(), err)
		}
		next := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, next); err != nil {
			return nil, fmt.Errorf("decoding CRD %s: %w", o.GetName(), err)
		}
		// As the API server stores it, so only real changes show.
		apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(next)
		if p.Compared != nil {
			p.Compared()
		}
		r, err := Compare(ctx, p.Objects, live, next, p.Options)
		if err != nil {
			return nil, err
		}
		if len(r.Findings) > 0 {
			reports = append(reports, r)
			p.remember(o.GetName(), nil)
			continue
		}
		if p.Digest != nil {
			p.remember(o.GetName(), &passedCRD{resourceVersion: live.ResourceVersion, next: c.digest})
		}
	}
	return reports, nil
}

// withoutSame returns compare without the CRDs same finds the live ones
// already hold, remembering those as passed.
func (p *Preflight) withoutSame(ctx context.Context, compare []pendingCRD, same func(context.Context, []*unstructured.Unstructured) (map[string]string, error)) []pendingCRD {
	crds := make([]*unstructured.Unstructured, len(compare))
	for i, c := range compare {
		crds[i] = c.crd
	}
	found, err := same(ctx, crds)
	if err != nil {
		return compare
	}
	kept := compare[:0]
	for _, c := range compare {
		if rv, ok := found[c.crd.GetName()]; ok {
			p.remember(c.crd.GetName(), &passedCRD{resourceVersion: rv, next: c.digest})
			continue
		}
		kept = append(kept, c)
	}
	return kept
}

// liveMetadata reads the live CRD name's metadata from cached, then (not
// there: the cache may lag, not hold it, or not have started) from
// p.CRDs; nil when there is none.
func (p *Preflight) liveMetadata(ctx context.Context, name string, cached client.Reader) (*metav1.PartialObjectMetadata, error) {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	if cached != nil {
		// Any failure of the cache (not there, not started yet) is the
		// API server's to answer.
		if err := cached.Get(ctx, client.ObjectKey{Name: name}, meta); err == nil {
			return meta, nil
		}
	}
	if err := p.CRDs.Get(ctx, client.ObjectKey{Name: name}, meta); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return meta, nil
}

// Passed records that the live CRD called name was, at resourceVersion,
// what applying the bundle CRD of digest (RunOptions.Digests) made it
// (with what the installer adds to every apply of it, such as a
// conversion webhook's caBundle, which no comparison finds fault with): a
// Run of the same CRD against that version passes without reading it. The
// caller read the CRD so after applying it.
func (p *Preflight) Passed(name, resourceVersion string, digest [32]byte) {
	if p == nil || p.Digest == nil || resourceVersion == "" {
		return
	}
	p.remember(name, &passedCRD{resourceVersion: resourceVersion, next: digest})
}

// passedBefore says whether the CRD named name last passed at c.
func (p *Preflight) passedBefore(name string, c passedCRD) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.passed[name]
	return ok && last == c
}

// remember notes the CRD's last pass (nil: it did not pass, or is gone).
// One entry per CRD on the cluster at most.
func (p *Preflight) remember(name string, c *passedCRD) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c == nil {
		delete(p.passed, name)
		return
	}
	if p.passed == nil {
		p.passed = map[string]passedCRD{}
	}
	p.passed[name] = *c
}

// RESTLister lists custom resources across all namespaces as JSON, for
// the check to stream.
type RESTLister struct{ Lists *liststream.Client }

// NewRESTLister returns a RESTLister for cfg's API server, through
// httpClient (nil: a new one for cfg).
func NewRESTLister(cfg *rest.Config, httpClient *http.Client) (*RESTLister, error) {
	c, err := liststream.New(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("CRD upgrade preflight: %w", err)
	}
	return &RESTLister{Lists: c}, nil
}

// ListJSON requests one page of gvr and returns its body, unread.
func (l *RESTLister) ListJSON(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (io.ReadCloser, error) {
	return l.Lists.Page(ctx, path.Join("/apis", gvr.Group, gvr.Version, gvr.Resource), opts)
}
