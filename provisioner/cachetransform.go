package provisioner

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// lastApplied is the annotation kubectl apply (client-side) writes: the
// whole object as last applied, read by kubectl only.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// CacheTransform is the manager cache's transform of every object it
// holds (most of them Bundles and BundleDeployments, one of each per
// installation): managedFields and kubectl's last-applied annotation go
// (nothing here reads them, and the annotation is a second copy of the
// object), and an image source's certificateData, repeated in a
// BundleDeployment's template, its Bundle's spec and its Bundle's resolved
// source, is kept once per distinct value (the same private registry's CA
// on every source is the usual case; up to maxInterned distinct values are
// shared).
func CacheTransform() toolscache.TransformFunc {
	strip := cache.TransformStripManagedFields()
	interned := &interner{m: map[string]string{}}
	return func(in any) (any, error) {
		out, err := strip(in)
		if err != nil {
			return out, err
		}
		if o, err := meta.Accessor(out); err == nil {
			if a := o.GetAnnotations(); a != nil {
				if _, ok := a[lastApplied]; ok {
					delete(a, lastApplied)
					o.SetAnnotations(a)
				}
			}
		}
		switch o := out.(type) {
		case *rukpakv1alpha1.BundleDeployment:
			interned.source(&o.Spec.Template.Spec.Source)
		case *rukpakv1alpha1.Bundle:
			interned.source(&o.Spec.Source)
			if o.Status.ResolvedSource != nil {
				interned.source(o.Status.ResolvedSource)
			}
		}
		return out, nil
	}
}

// maxInterned bounds the distinct values an interner shares: past it,
// values are kept as decoded.
const maxInterned = 64

type interner struct {
	mu sync.Mutex
	m  map[string]string
}

func (i *interner) source(s *rukpakv1alpha1.BundleSource) {
	if s.Image != nil && s.Image.CertificateData != "" {
		s.Image.CertificateData = i.intern(s.Image.CertificateData)
	}
}

func (i *interner) intern(s string) string {
	i.mu.Lock()
	defer i.mu.Unlock()
	if v, ok := i.m[s]; ok {
		return v
	}
	if len(i.m) < maxInterned {
		i.m[s] = s
	}
	return s
}
