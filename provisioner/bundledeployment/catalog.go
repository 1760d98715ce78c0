package bundledeployment

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/catalog/resolve"
	"github.com/rukpak-dev/rukpak/provisioner/catalogsource"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
)

// Catalog sources.
//
// A template whose source is of type catalog never becomes a Bundle as it
// is: each reconcile resolves it against the Catalogs to one bundle image,
// and everything after works on the concrete template, the same template
// with an image source naming that image exactly as the catalog does. Its
// hash names the generated Bundle, so a different resolution is a different
// Bundle and a pivot (with the CRD preflight and Manual approval), and the
// same resolution is the same Bundle. When resolution fails, the concrete
// template is the active Bundle's, so the installed content keeps running,
// drift-corrected, until it succeeds again.

// CatalogResolver resolves a catalog source (catalogsource.Resolver).
type CatalogResolver interface {
	Resolve(ctx context.Context, src *rukpakv1alpha1.CatalogSource, installed *resolve.Installed) (*resolve.Result, error)
	// InstalledByImage finds the catalog bundle whose image is image;
	// nil when no selected catalog names it.
	InstalledByImage(ctx context.Context, src *rukpakv1alpha1.CatalogSource, image string) (*resolve.Installed, error)
}

// catalogRecheck is when a transient resolution failure is tried again.
const catalogRecheck = 30 * time.Second

// resolution is what one reconcile made of a catalog source.
type resolution struct {
	// src is the template's catalog source: bd's spec holds the concrete
	// template once resolved.
	src    *rukpakv1alpha1.CatalogSource
	result *resolve.Result // nil when resolution failed
	err    error
	// spec is the concrete template spec this reconcile installs: the
	// resolved bundle's image, or the active Bundle's spec after a failed
	// resolution; nil when there is nothing to install.
	spec *rukpakv1alpha1.BundleSpec
}

func isCatalogSource(bd *rukpakv1alpha1.BundleDeployment) bool {
	return bd.Spec.Template.Spec.Source.Type == rukpakv1alpha1.SourceTypeCatalog
}

// resolveCatalog resolves bd's catalog source; nil for another source.
func (r *Reconciler) resolveCatalog(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment) *resolution {
	if !isCatalogSource(bd) {
		return nil
	}
	src := bd.Spec.Template.Spec.Source.Catalog
	res := &resolution{src: src}
	switch {
	case src == nil:
		res.err = errors.New("spec.template.spec.source.catalog must be set for source type \"catalog\"")
	case r.Catalogs == nil:
		res.err = errors.New("this provisioner is not configured to resolve catalog sources")
	default:
		var installed *resolve.Installed
		installed, res.err = r.installedCatalogBundle(ctx, bd, src)
		if res.err == nil {
			res.result, res.err = r.Catalogs.Resolve(ctx, src, installed)
		}
	}
	if res.err == nil {
		res.spec = &rukpakv1alpha1.BundleSpec{
			ProvisionerClassName: bd.Spec.Template.Spec.ProvisionerClassName,
			Source: rukpakv1alpha1.BundleSource{
				Type: rukpakv1alpha1.SourceTypeImage,
				Image: &rukpakv1alpha1.ImageSource{
					Ref:                   res.result.Image,
					CertificateData:       src.CertificateData,
					InsecureSkipTLSVerify: src.InsecureSkipTLSVerify,
				},
			},
		}
		return res
	}
	// The active Bundle stays: its spec is the template's for now.
	if name := bd.Status.ActiveBundle; name != "" {
		b := &rukpakv1alpha1.Bundle{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, b); err == nil && created(bd, b) {
			res.spec = b.Spec.DeepCopy()
		} else if err != nil && !apierrors.IsNotFound(err) {
			res.err = errors.Join(res.err, &catalogsource.TransientError{Err: fmt.Errorf("reading active bundle %q: %w", name, err)})
		}
	}
	return res
}

// installedCatalogBundle is the catalog bundle resolution starts from:
// the one status.catalog.installed records, else (the status write after an
// install was lost: a crash, a conflict) the bundle the catalogs name with
// the active Bundle's image. The active Bundle is one this BundleDeployment
// generated, and its spec is immutable, so the image is what was installed.
// Without either, resolution is a first install.
func (r *Reconciler) installedCatalogBundle(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, src *rukpakv1alpha1.CatalogSource) (*resolve.Installed, error) {
	if in := installedFor(bd, src); in != nil || bd.Status.ActiveBundle == "" {
		return in, nil
	}
	b := &rukpakv1alpha1.Bundle{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: bd.Status.ActiveBundle}, b); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, &catalogsource.TransientError{Err: fmt.Errorf("reading active bundle %q: %w", bd.Status.ActiveBundle, err)}
	}
	if !created(bd, b) || b.Spec.Source.Image == nil {
		return nil, nil
	}
	return r.Catalogs.InstalledByImage(ctx, src, b.Spec.Source.Image.Ref)
}

// installedFor is the installed catalog bundle status.catalog.installed
// records, which only the provisioner writes, if it is of the package the
// source asks for.
func installedFor(bd *rukpakv1alpha1.BundleDeployment, src *rukpakv1alpha1.CatalogSource) *resolve.Installed {
	st := bd.Status.Catalog
	if st == nil || st.Installed == nil || st.Installed.Package != src.PackageName || bd.Status.ActiveBundle == "" {
		return nil
	}
	return &resolve.Installed{Name: st.Installed.Name, Version: st.Installed.Version, Image: st.Installed.Image}
}

// catalogBundle is the status form of a resolution's result.
func catalogBundle(pkg string, res *resolve.Result) rukpakv1alpha1.CatalogBundle {
	return rukpakv1alpha1.CatalogBundle{
		Package: pkg,
		Name:    res.Bundle,
		Version: res.Version,
		Image:   res.Image,
		Catalog: res.Catalog,
		// A catalog may put a bundle in any number of channels; the
		// status lists at most maxStatusChannels (its schema's bound: a
		// longer list made every status write of the BundleDeployment
		// fail).
		Channels: slices.Clone(res.Channels[:min(len(res.Channels), maxStatusChannels)]),
	}
}

// maxStatusChannels is status.catalog's bound on a bundle's channels.
const maxStatusChannels = 256

// catalogConditionTypes are the conditions only a catalog source has.
var catalogConditionTypes = []string{
	rukpakv1alpha1.TypeResolved, rukpakv1alpha1.TypeDeprecated, rukpakv1alpha1.TypePackageDeprecated,
	rukpakv1alpha1.TypeChannelDeprecated, rukpakv1alpha1.TypeBundleDeprecated,
}

// reportCatalog writes what res says to bd's status: Resolved,
// status.catalog.resolved and unreachable versions, and the deprecation
// conditions (with a Warning event when one turns True). Without a
// catalog source, it clears all of them.
func (r *Reconciler) reportCatalog(bd *rukpakv1alpha1.BundleDeployment, res *resolution) {
	if res == nil {
		bd.Status.Catalog = nil
		for _, t := range catalogConditionTypes {
			meta.RemoveStatusCondition(&bd.Status.Conditions, t)
		}
		return
	}
	if bd.Status.Catalog == nil {
		bd.Status.Catalog = &rukpakv1alpha1.CatalogSourceStatus{}
	}
	st := bd.Status.Catalog
	src := res.src
	if res.err != nil {
		msg := res.err.Error()
		if res.spec != nil {
			msg += fmt.Sprintf("; bundle %q stays installed", bd.Status.ActiveBundle)
		}
		if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeResolved); c == nil || c.Status != metav1.ConditionFalse || c.Message != msg {
			r.event(bd, "Warning", rukpakv1alpha1.ReasonResolutionFailed, msg)
		}
		r.set(bd, rukpakv1alpha1.TypeResolved, metav1.ConditionFalse, rukpakv1alpha1.ReasonResolutionFailed, msg)
		if res.spec == nil {
			// Nothing to install, nor any Bundle to say it is valid.
			r.set(bd, rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonResolutionFailed, msg)
		}
		return
	}
	out := res.result
	if src == nil {
		return
	}
	st.Resolved = &rukpakv1alpha1.ResolvedCatalogBundle{CatalogBundle: catalogBundle(src.PackageName, out), Edge: string(out.Edge)}
	st.Unreachable, st.UnreachableTotal = slices.Clone(out.Unreachable), int32(min(out.UnreachableTotal, 1<<30))
	msg := fmt.Sprintf("Resolved package %q to bundle %q (version %s, image %s) from catalog %q (%s)",
		src.PackageName, out.Bundle, out.Version, out.Image, out.Catalog, out.Edge)
	if len(out.Dependencies) > 0 {
		msg += fmt.Sprintf("; the bundle declares dependencies (%s), which are not resolved: what they provide must be installed otherwise", strings.Join(out.Dependencies, ", "))
	}
	if out.UnreachableTotal > 0 {
		msg += fmt.Sprintf("; %d versions in range cannot be reached from the installed bundle by the catalog's upgrade edges", out.UnreachableTotal)
	}
	r.set(bd, rukpakv1alpha1.TypeResolved, metav1.ConditionTrue, rukpakv1alpha1.ReasonResolved, msg)
	r.reportDeprecations(bd, out.Deprecations)
}

// reportDeprecations sets the deprecation conditions as OLM v1's
// ClusterExtension does, with the catalog's messages.
func (r *Reconciler) reportDeprecations(bd *rukpakv1alpha1.BundleDeployment, deps []resolve.Deprecation) {
	var pkg, ch, bundle []string
	for _, d := range deps {
		switch d.Scope {
		case resolve.ScopePackage:
			pkg = append(pkg, d.Message)
		case resolve.ScopeChannel:
			ch = append(ch, fmt.Sprintf("channel %q: %s", d.Name, d.Message))
		case resolve.ScopeBundle:
			bundle = append(bundle, fmt.Sprintf("bundle %q: %s", d.Name, d.Message))
		case resolve.ScopeInstalledBundle:
			bundle = append(bundle, fmt.Sprintf("installed bundle %q: %s", d.Name, d.Message))
		}
	}
	set := func(typ string, msgs []string, none string) {
		if len(msgs) == 0 {
			r.set(bd, typ, metav1.ConditionFalse, rukpakv1alpha1.ReasonNotDeprecated, none)
			return
		}
		msg := strings.Join(msgs, "; ")
		if !conditions.Is(bd.Status.Conditions, typ, metav1.ConditionTrue) {
			r.event(bd, "Warning", typ, msg)
		}
		r.set(bd, typ, metav1.ConditionTrue, rukpakv1alpha1.ReasonDeprecated, msg)
	}
	set(rukpakv1alpha1.TypePackageDeprecated, pkg, "The package is not deprecated")
	set(rukpakv1alpha1.TypeChannelDeprecated, ch, "No channel is deprecated")
	set(rukpakv1alpha1.TypeBundleDeprecated, bundle, "The bundle is not deprecated")
	all := slices.Concat(pkg, ch, bundle)
	if len(pkg) > 0 {
		all[0] = "package: " + pkg[0]
	}
	if len(all) == 0 {
		r.set(bd, rukpakv1alpha1.TypeDeprecated, metav1.ConditionFalse, rukpakv1alpha1.ReasonNotDeprecated, "Neither the package, a channel nor the bundle is deprecated")
		return
	}
	// No event of its own: the specific conditions' events name each.
	r.set(bd, rukpakv1alpha1.TypeDeprecated, metav1.ConditionTrue, rukpakv1alpha1.ReasonDeprecated, strings.Join(all, "; "))
}

// recordInstalledCatalogBundle notes, once b is installed, the catalog
// bundle it was resolved to: the next resolution's starting point.
func recordInstalledCatalogBundle(bd *rukpakv1alpha1.BundleDeployment, res *resolution, b *rukpakv1alpha1.Bundle) {
	if res == nil || res.result == nil || bd.Status.Catalog == nil || bd.Status.Catalog.Resolved == nil {
		return
	}
	if b.Spec.Source.Image == nil || b.Spec.Source.Image.Ref != res.result.Image {
		return
	}
	installed := bd.Status.Catalog.Resolved.CatalogBundle
	bd.Status.Catalog.Installed = &installed
}

// catalogChanged passes the Catalog events that may change a resolution:
// created, deleted, new content, serving or not, a new priority or labels.
var catalogChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*rukpakv1alpha1.Catalog)
		n, ok2 := e.ObjectNew.(*rukpakv1alpha1.Catalog)
		if !ok1 || !ok2 {
			return false
		}
		return o.Status.ContentDigest != n.Status.ContentDigest || o.Spec.Priority != n.Spec.Priority ||
			!maps.Equal(o.Labels, n.Labels) ||
			conditions.Is(o.Status.Conditions, rukpakv1alpha1.TypeServing, metav1.ConditionTrue) != conditions.Is(n.Status.Conditions, rukpakv1alpha1.TypeServing, metav1.ConditionTrue)
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// catalogRequests maps a Catalog event to this class's BundleDeployments
// with a catalog source.
func (r *Reconciler) catalogRequests(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &rukpakv1alpha1.BundleDeploymentList{}
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		bd := &list.Items[i]
		if bd.Spec.ProvisionerClassName == r.Class && isCatalogSource(bd) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(bd)})
		}
	}
	return r.wokenRequests(reqs)
}
