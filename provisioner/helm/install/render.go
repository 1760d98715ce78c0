package install

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/bundledeployment"
	"github.com/rukpak-dev/rukpak/provisioner/helm"
	"github.com/rukpak-dev/rukpak/provisioner/identity"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// As returns an Installer that installs, upgrades and uninstalls as sa:
// Helm's kube client (the release's objects, crds/ and hooks) and a chart's
// lookups act with sa's identity, c (sa's client) deletes what an
// interrupted uninstall left and reads the values sources (spec.config's
// valuesFrom: the chart gets only values sa may read). Release records
// stay read and written with the provisioner's own identity.
func (in *Installer) As(sa identity.ServiceAccount, c client.Client) bundledeployment.Installer {
	in.cache() // shared with v
	in.jobs()
	v := *in
	v.user = sa.Username()
	v.Client = c
	v.Reader = c
	v.reader = "service account " + sa.String()
	v.Releases = in.Releases.As(c)
	return &v
}

// Warm starts the process that renders the next chart (helm.Warm): a
// BundleDeployment's Bundle unpacks, and its install renders next.
func (in *Installer) Warm() { helm.Warm() }

// Render returns what the next Install of bd from fsys would apply, applying
// nothing: the deployed release's objects when its inputs are unchanged
// (Current), nil while a failed revision of the same inputs waits for its
// retry (Install applies nothing then), else the chart frozen for that
// Install (prepare: rendered in the bounded child process for the install
// or upgrade it is, lookups reading as the Installer's identity; kept for
// the Install, which applies exactly that text) as Helm's action renders
// it, through the same post-renderer.
func (in *Installer) Render(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, fsys fs.FS, stamp func(*unstructured.Unstructured)) (*release.Rendered, error) {
	next, err := in.readInputs(ctx, bd, fsys)
	if err != nil {
		return nil, err
	}
	cfg, ch, vals := next.cfg, next.chart, next.values
	// The release's records are locked while its action runs.
	if err := in.busy(bd.Name); err != nil {
		return nil, err
	}
	hist, err := in.history(ctx, bd.Name)
	if err != nil {
		return nil, err
	}
	last, deployed := latest(hist)
	switch {
	case next.current(last, deployed):
		objs, err := installed(deployed)
		if err != nil {
			return nil, err
		}
		return &release.Rendered{Objects: objs, Namespace: deployed.Namespace, Upgrade: true, Current: true}, nil
	case in.waiting(next, last):
		return nil, nil
	}

	frozen, err := in.prepare(ctx, bd, next, last, deployed)
	if err != nil {
		return nil, err
	}
	r, err := frozen.DryRun(ctx, ch, vals, bd.Name)
	if err != nil {
		return nil, err
	}
	mapper, err := in.Releases.ActionConfig(ctx, nil).RESTClientGetter.ToRESTMapper()
	if err != nil {
		return nil, fmt.Errorf("creating REST mapper: %w", err)
	}
	pr := &postRenderer{stamp: stamp, release: bd.Name, namespace: cfg.InstallNamespace, forbidden: in.Releases.Namespace(), mapper: mapper}
	manifest, err := pr.Run(bytes.NewBufferString(r.Release.Manifest))
	if err != nil {
		return nil, err
	}
	out := &release.Rendered{Namespace: cfg.InstallNamespace, Upgrade: deployed != nil}
	if out.Objects, err = release.DecodeManifest(manifest.String()); err != nil {
		return nil, fmt.Errorf("chart %q: %w", ch.Name(), err)
	}
	for _, crd := range r.CRDs {
		objs, err := release.DecodeManifest(string(crd.File.Data))
		if err != nil {
			return nil, fmt.Errorf("chart %q %s: %w", ch.Name(), crd.Filename, err)
		}
		out.CRDs = append(out.CRDs, objs...)
	}
	// The kinds of every crds/ CRD, created by the install or earlier.
	var crds []*unstructured.Unstructured
	for _, crd := range ch.CRDObjects() {
		objs, err := release.DecodeManifest(string(crd.File.Data))
		if err != nil {
			return nil, fmt.Errorf("chart %q %s: %w", ch.Name(), crd.Filename, err)
		}
		crds = append(crds, objs...)
	}
	for _, h := range r.Release.Hooks {
		objs, err := release.DecodeManifest(h.Manifest)
		if err != nil {
			return nil, fmt.Errorf("chart %q hook %s: %w", ch.Name(), h.Path, err)
		}
		out.Hooks = append(out.Hooks, objs...)
	}
	// Helm's client places objects without a namespace in the release's,
	// kinds of the chart's own CRDs included, which the cluster serves
	// only once the install created them.
	scopes := namespacedKinds(append(crds, out.Objects...))
	placeIn(out.Objects, cfg.InstallNamespace, mapper, scopes)
	placeIn(out.Hooks, cfg.InstallNamespace, mapper, scopes)
	return out, nil
}

// namespacedKinds says, for each kind the CRDs among objs define, whether
// it is namespaced.
func namespacedKinds(objs []*unstructured.Unstructured) map[schema.GroupKind]bool {
	kinds := map[schema.GroupKind]bool{}
	for _, o := range objs {
		if o.GroupVersionKind().GroupKind() != (schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}) {
			continue
		}
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
		kinds[schema.GroupKind{Group: group, Kind: kind}] = scope == "Namespaced"
	}
	return kinds
}

// history reads release name's records under its lock.
func (in *Installer) history(ctx context.Context, name string) ([]*helmrelease.Release, error) {
	defer in.Releases.Lock(name)()
	return in.Releases.RecoverHistory(ctx, name)
}

func placeIn(objs []*unstructured.Unstructured, namespace string, mapper meta.RESTMapper, scopes map[schema.GroupKind]bool) {
	for _, o := range objs {
		if o.GetNamespace() != "" {
			continue
		}
		gvk := o.GroupVersionKind()
		namespaced, ok := scopes[gvk.GroupKind()]
		if m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			namespaced, ok = m.Scope.Name() == meta.RESTScopeNameNamespace, true
		}
		if ok && namespaced {
			o.SetNamespace(namespace)
		}
	}
}
