package bundledeployment

import (
	"context"
	"fmt"
	"io/fs"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// RenderingInstaller is an Installer whose objects exist only once it
// renders its content (the helm class): Render returns what its next
// Install of bd from fsys would apply, applying nothing; nil when that
// Install would apply nothing.
type RenderingInstaller interface {
	Installer
	Render(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, fsys fs.FS, stamp func(*unstructured.Unstructured)) (*release.Rendered, error)
}

// checked returns the objects the identity and CRD upgrade preflights look
// at before an install: objs as Objects found them or, for an installer
// that renders, what its next Install would apply (every object, hooks and
// crds/ included, for the permissions; the release's objects for CRD
// upgrades, since crds/ are never updated). ok is false when nothing may be
// applied; the Installed condition says why.
func (r *Reconciler) checked(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, b *rukpakv1alpha1.Bundle, fsys fs.FS, objs []*unstructured.Unstructured) (perms, crds []*unstructured.Unstructured, ok bool, err error) {
	ri, renders := r.installer().(RenderingInstaller)
	if r.Objects != nil || !renders {
		return objs, objs, true, nil
	}
	ri, ok = r.renderer(bd, ri)
	if !ok {
		// installAs says why nothing is installed.
		return nil, nil, true, nil
	}
	rendered, err := ri.Render(ctx, bd, fsys, ownerStamper(bd))
	if p, ok := pending(err); ok {
		r.setPending(bd, p)
		return nil, nil, false, nil
	}
	switch {
	case err == nil && rendered == nil:
		return nil, nil, true, nil
	case err == nil && rendered.Current:
		// Nothing is upgraded: only drift correction applies, the objects.
		return rendered.Objects, nil, true, nil
	case err == nil:
		return rendered.All(), rendered.Objects, true, nil
	}
	// Install fails on the same render and says why; only an identity,
	// whose permissions must be known before anything is applied, stops
	// here.
	if r.Identity != nil {
		if sa, named, perr := r.Identity.Policy.For(bd); perr == nil && named {
			msg := fmt.Sprintf("Checking what service account %s may do failed; nothing was applied: %v", sa, err)
			r.set(bd, rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInsufficientPermissions, msg)
			return nil, nil, false, fmt.Errorf("rendering bundle %q to check service account %s: %w", b.Name, sa, err)
		}
	}
	return nil, nil, true, nil
}

// renderer is ri acting as the identity bd installs with (a chart's
// lookups read what that identity may read), which is also the installer
// that then installs, so a render is not repeated; ok is false when the
// identity policy refuses bd (installAs says why).
func (r *Reconciler) renderer(bd *rukpakv1alpha1.BundleDeployment, ri RenderingInstaller) (_ RenderingInstaller, ok bool) {
	if r.Identity == nil {
		return ri, true
	}
	sa, named, err := r.Identity.Policy.For(bd)
	switch {
	case err != nil:
		return nil, false
	case !named:
		return ri, true
	}
	imp, can := ri.(ImpersonatingInstaller)
	if !can {
		return ri, true
	}
	as, err := r.Identity.Clients.For(sa)
	if err != nil {
		// installAs fails on the same error.
		return nil, false
	}
	if v, renders := imp.As(sa, as).(RenderingInstaller); renders {
		return v, true
	}
	return ri, true
}

// annotationHook is Helm's annotation naming the events a hook runs on.
const annotationHook = "helm.sh/hook"

// PlanRender says what installing fsys would change in bd's release now,
// for an installer that renders its content: the release's objects as
// PlanPivot compares them (server-side dry runs), and the hooks the
// install or upgrade would run, listed apart.
func PlanRender(ctx context.Context, releases *release.Manager, ri RenderingInstaller, bd *rukpakv1alpha1.BundleDeployment, fsys fs.FS) (*release.Plan, error) {
	rendered, err := ri.Render(ctx, bd, fsys, ownerStamper(bd))
	if err != nil {
		return nil, err
	}
	if rendered == nil {
		return nil, fmt.Errorf("release %q: its last revision failed with the same content and values and is not retried yet", bd.Name)
	}
	p, err := releases.PlanStamped(ctx, bd.Name, rendered.Namespace, rendered.Objects)
	if err != nil {
		return nil, err
	}
	if rendered.Current {
		return p, nil
	}
	phase := "install"
	if rendered.Upgrade {
		phase = "upgrade"
	}
	for _, h := range rendered.Hooks {
		var events []string
		for _, e := range strings.Split(h.GetAnnotations()[annotationHook], ",") {
			if e = strings.TrimSpace(e); e == "pre-"+phase || e == "post-"+phase {
				events = append(events, e)
			}
		}
		if len(events) > 0 {
			p.Hooks = append(p.Hooks, fmt.Sprintf("%s (%s)", describe(h), strings.Join(events, ",")))
		}
	}
	return p, nil
}
