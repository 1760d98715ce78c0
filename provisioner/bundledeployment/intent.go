package bundledeployment

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// The creation intent of a BundleDeployment's first Bundle (issue 15: one
// API write per install fewer).
//
// The intent (the name of the Bundle about to be created, persisted before
// the create request: see bundles.go) used to be a status write of its own
// before every create. The first reconcile of a BundleDeployment writes its
// finalizer anyway, in a metadata patch: the first Bundle's intent goes in
// that same patch, as the annotation core.rukpak.io/creating-bundle. Later
// Bundles (pivots) keep the status intent: no metadata patch happens then
// anyway, so the annotation would cost the same one write, and the status,
// which only the provisioner writes, is the stronger record.
//
// The annotation is hostile input: anyone who may edit the BundleDeployment
// may set it. So it is honoured only
//   - while the BundleDeployment has recorded no Bundle at all
//     (status.generatedBundles and status.activeBundle empty: before its
//     first Bundle's UID is recorded, the window the intent covers), which
//     also makes it inert once the first Bundle is recorded, so it is left
//     in place rather than cleared with a write of its own;
//   - when it is a valid Bundle name (at most 253 characters) and names
//     exactly the Bundle the current template generates;
//   - for adopting a Bundle found under that name only if the Bundle is
//     controlled by this BundleDeployment (owner reference by UID), labelled
//     for it with the template hash of its name, and its spec equals the
//     template (claim). It never makes a Bundle deletable: deletion goes by
//     recorded UIDs only (ownedBundles).
// The finalizer's patch writes it only if no Bundle exists under that name
// (and removes a value someone set otherwise), so a Bundle created ahead of
// the BundleDeployment's first reconcile is passed over as before (the
// first Bundle gets a random name, with its intent in status: bundles.go).
// A create answered "already exists" proves the Bundle is someone else's:
// the annotation is removed (a write only on that path) and the Bundle
// passed over.
// What is left: someone who may both edit the BundleDeployment and create
// Bundles can set the annotation on a BundleDeployment that has never
// recorded a Bundle and have it adopt a Bundle they created with its owner
// reference, labels and exactly the template's spec: it installs what the
// template says, which such a user can ask for anyway.

// maxBundleName bounds a Bundle name (a DNS subdomain).
const maxBundleName = validation.DNS1123SubdomainMaxLength

// annotatedIntent returns the Bundle name bd's creation-intent annotation
// holds if it is to be honoured against status (what the API server holds,
// or this process's records): "" when bd has recorded a Bundle already, or
// the value is not a valid Bundle name. Callers compare it with the name
// the template generates.
func annotatedIntent(bd *rukpakv1alpha1.BundleDeployment, status *rukpakv1alpha1.BundleDeploymentStatus) string {
	v, ok := bd.Annotations[rukpakv1alpha1.AnnotationCreatingBundle]
	if !ok || len(status.GeneratedBundles) > 0 || status.ActiveBundle != "" {
		return ""
	}
	if len(v) > maxBundleName || len(validation.IsDNS1123Subdomain(v)) > 0 {
		return ""
	}
	return v
}

// ensureFinalizer adds the uninstall finalizer if it is missing, in one
// metadata patch with the creation intent of bd's first Bundle when a
// Bundle is about to be created for it.
func (r *Reconciler) ensureFinalizer(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment) error {
	if controllerutil.ContainsFinalizer(bd, rukpakv1alpha1.FinalizerUninstall) {
		return nil
	}
	name, err := r.firstIntent(ctx, bd)
	if err != nil {
		return err
	}
	// The merge patch MergeFrom of the whole objects makes, written
	// directly (that marshalled the BundleDeployment twice and diffed the
	// two): the finalizers, and the intent annotation set or removed.
	controllerutil.AddFinalizer(bd, rukpakv1alpha1.FinalizerUninstall)
	meta := map[string]any{"finalizers": bd.Finalizers}
	old, had := bd.Annotations[rukpakv1alpha1.AnnotationCreatingBundle]
	switch {
	case name != "" && (!had || old != name):
		meta["annotations"] = map[string]any{rukpakv1alpha1.AnnotationCreatingBundle: name}
		if bd.Annotations == nil {
			bd.Annotations = map[string]string{}
		}
		bd.Annotations[rukpakv1alpha1.AnnotationCreatingBundle] = name
	case name == "" && had:
		meta["annotations"] = map[string]any{rukpakv1alpha1.AnnotationCreatingBundle: nil}
		delete(bd.Annotations, rukpakv1alpha1.AnnotationCreatingBundle)
	}
	data, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, bd, client.RawPatch(types.MergePatchType, data)); err != nil {
		return fmt.Errorf("adding finalizer %s: %w", rukpakv1alpha1.FinalizerUninstall, err)
	}
	return nil
}

// firstIntent returns the name of the first Bundle bd is about to create,
// or "" if it has recorded one already, is paused, or a Bundle exists
// under that name (claim decides about it, without an intent).
func (r *Reconciler) firstIntent(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment) (string, error) {
	if bd.Spec.Paused || len(bd.Status.GeneratedBundles) > 0 || bd.Status.ActiveBundle != "" || r.records.has(bd) || isCatalogSource(bd) {
		// A catalog source's Bundle is named after the template it
		// resolves to, unknown here: its intent goes to the status.
		return "", nil
	}
	hash, err := TemplateHash(bd.Spec.Template)
	if err != nil {
		// desiredBundle reports it.
		return "", nil //nolint:nilerr
	}
	name := bd.Name + "-" + hash
	if len(name) > maxBundleName {
		return "", nil
	}
	err = r.Client.Get(ctx, client.ObjectKey{Name: name}, &rukpakv1alpha1.Bundle{})
	switch {
	case apierrors.IsNotFound(err):
		return name, nil
	case err != nil:
		return "", fmt.Errorf("reading bundle %q: %w", name, err)
	}
	return "", nil
}

// dropIntent removes bd's creation-intent annotation: the Bundle it names
// turned out to be someone else's. Only bd's metadata changes: the status
// this reconcile is building stays as it is.
func (r *Reconciler) dropIntent(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment) error {
	if _, ok := bd.Annotations[rukpakv1alpha1.AnnotationCreatingBundle]; !ok {
		return nil
	}
	meta := &rukpakv1alpha1.BundleDeployment{ObjectMeta: *bd.ObjectMeta.DeepCopy()}
	patch := client.MergeFrom(meta.DeepCopy())
	delete(meta.Annotations, rukpakv1alpha1.AnnotationCreatingBundle)
	if err := r.Client.Patch(ctx, meta, patch); err != nil {
		return fmt.Errorf("removing annotation %s: %w", rukpakv1alpha1.AnnotationCreatingBundle, err)
	}
	bd.Annotations = meta.Annotations
	bd.ResourceVersion = meta.ResourceVersion
	return nil
}

// generatedFor says whether b carries what the provisioner gives a Bundle
// it generates for bd: bd as its controller (by UID) and bd's owner labels
// with the template hash its name ends with. Anyone creating a Bundle can
// copy all of it: it only narrows what an annotated intent may adopt.
func generatedFor(bd *rukpakv1alpha1.BundleDeployment, b *rukpakv1alpha1.Bundle) bool {
	l := b.Labels
	return metav1.IsControlledBy(b, bd) &&
		l[rukpakv1alpha1.LabelOwnerKind] == "BundleDeployment" &&
		l[rukpakv1alpha1.LabelOwnerName] == bd.Name &&
		l[rukpakv1alpha1.LabelBundleTemplateHash] != "" &&
		b.Name == bd.Name+"-"+l[rukpakv1alpha1.LabelBundleTemplateHash]
}

// has says whether this process has recorded a Bundle for bd.
func (rs *records) has(bd *rukpakv1alpha1.BundleDeployment) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.m[bd.UID]) > 0
}
