package bundledeployment

import (
	"context"
	"crypto/rand"
	"fmt"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// Which generated Bundles a BundleDeployment may install.
//
// A Bundle's name, labels, owner references and managedFields are all chosen
// by whoever creates it, and the generated name (<bd>-<template hash>) can be
// computed by anyone who can read the BundleDeployment. So none of them says
// who created a Bundle. What does: the UID the API server returns to the
// create request, which this reconciler records in the BundleDeployment's
// status.generatedBundles (writable only through bundledeployments/status,
// which only the provisioner is granted). A Bundle is installed only if its
// UID is recorded there and its spec equals the template; anything else
// under the generated name is never installed, adopted or deleted (it is
// someone else's object): the template's Bundle gets a name with a random
// suffix instead (desiredBundle), so pre-creating the computable name
// blocks no install, pivot or rollback.
//
// The record is written in two steps so that a crash never strands a
// Bundle the provisioner created: the name first (an intent, persisted
// before the create request), the UID once the create succeeds. A create
// answered "already exists" proves the Bundle is someone else's, and the
// intent is dropped. Only when the provisioner stopped between the two
// steps is a Bundle under an intent's name adopted, and then only if its
// spec equals the template, so at worst a Bundle someone raced into that
// window installs exactly what the template asks for. The first Bundle's
// intent is an annotation written with the finalizer instead of a status
// write of its own, and trusted less: see intent.go.

// refusedError is a generated Bundle this BundleDeployment will not
// install; its message is shown to users as it is.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

// records is the authoritative copy of every BundleDeployment's
// status.generatedBundles in this process, by BundleDeployment UID. The
// status in the informer cache can lag behind the provisioner's own writes
// (a Bundle's create event may come first); this copy cannot.
type records struct {
	mu sync.Mutex
	m  map[types.UID][]rukpakv1alpha1.GeneratedBundle
	// written is what the API server holds of each list, as far as this
	// process knows (persisted, wrote).
	written map[types.UID][]rukpakv1alpha1.GeneratedBundle
	// sent is the last status this process wrote for each
	// BundleDeployment (catchUp, wrote).
	sent map[types.UID]sentStatus
}

// load makes bd's status show this process's records, or adopts bd's status
// as the records if this process has none (after a restart).
func (rs *records) load(bd *rukpakv1alpha1.BundleDeployment) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.m == nil {
		rs.m = map[types.UID][]rukpakv1alpha1.GeneratedBundle{}
	}
	if mine, ok := rs.m[bd.UID]; ok {
		bd.Status.GeneratedBundles = append([]rukpakv1alpha1.GeneratedBundle(nil), mine...)
		return
	}
	rs.m[bd.UID] = append([]rukpakv1alpha1.GeneratedBundle(nil), bd.Status.GeneratedBundles...)
	if rs.written == nil {
		rs.written = map[types.UID][]rukpakv1alpha1.GeneratedBundle{}
	}
	rs.written[bd.UID] = append([]rukpakv1alpha1.GeneratedBundle(nil), bd.Status.GeneratedBundles...)
}

func (rs *records) save(bd *rukpakv1alpha1.BundleDeployment) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.m == nil {
		rs.m = map[types.UID][]rukpakv1alpha1.GeneratedBundle{}
	}
	rs.m[bd.UID] = append([]rukpakv1alpha1.GeneratedBundle(nil), bd.Status.GeneratedBundles...)
}

func (rs *records) drop(bd *rukpakv1alpha1.BundleDeployment) { rs.dropUID(bd.UID) }

func (rs *records) dropUID(uid types.UID) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	delete(rs.m, uid)
	delete(rs.written, uid)
	delete(rs.sent, uid)
}

// record sets name's entry (uid empty for an intent), keeping at most twice
// the generated Bundles allowed: the oldest but the active one go first
// (the one just recorded is last). Entries normally leave when the
// reconciler deletes their Bundle; the bound covers Bundles deleted by
// others.
func (r *Reconciler) record(bd *rukpakv1alpha1.BundleDeployment, name string, uid types.UID) {
	list := bd.Status.GeneratedBundles[:0:0]
	for _, g := range bd.Status.GeneratedBundles {
		if g.Name != name {
			list = append(list, g)
		}
	}
	list = append(list, rukpakv1alpha1.GeneratedBundle{Name: name, UID: uid})
	for excess := len(list) - 2*r.maxBundles(); excess > 0; excess-- {
		drop := 0
		if list[0].Name == bd.Status.ActiveBundle {
			drop = 1
		}
		list = append(list[:drop], list[drop+1:]...)
	}
	bd.Status.GeneratedBundles = list
	r.records.save(bd)
}

// forget removes name's entry once its Bundle is deleted.
func (r *Reconciler) forget(bd *rukpakv1alpha1.BundleDeployment, name string) {
	list := bd.Status.GeneratedBundles[:0:0]
	for _, g := range bd.Status.GeneratedBundles {
		if g.Name != name {
			list = append(list, g)
		}
	}
	bd.Status.GeneratedBundles = list
	r.records.save(bd)
}

func recordOf(bd *rukpakv1alpha1.BundleDeployment, name string) (rukpakv1alpha1.GeneratedBundle, bool) {
	for _, g := range bd.Status.GeneratedBundles {
		if g.Name == name {
			return g, true
		}
	}
	return rukpakv1alpha1.GeneratedBundle{}, false
}

// created reports whether b is a Bundle this reconciler created for bd.
func created(bd *rukpakv1alpha1.BundleDeployment, b *rukpakv1alpha1.Bundle) bool {
	g, ok := recordOf(bd, b.Name)
	return ok && g.UID != "" && g.UID == b.UID
}

func (r *Reconciler) maxBundles() int {
	if r.MaxBundles <= 0 {
		return DefaultMaxBundles
	}
	return r.MaxBundles
}

// checkSpec refuses a Bundle whose spec is not the template's.
func checkSpec(bd *rukpakv1alpha1.BundleDeployment, b *rukpakv1alpha1.Bundle) error {
	if equality.Semantic.DeepEqual(b.Spec, bd.Spec.Template.Spec) {
		return nil
	}
	return &refusedError{fmt.Sprintf("bundle %q no longer matches the template (its spec was changed): refusing to install it; delete it to let the bundle deployment create it again", b.Name)}
}

// nameAttempts bounds the names one reconcile tries for a new Bundle
// before it gives up until the next (with the controller's backoff).
const nameAttempts = 5

// desiredBundle finds or creates the Bundle generated from bd's current
// template; flush persists bd's status (the creation intent must be stored
// before the create request).
//
// Its name is <bd>-<template hash> unless a Bundle that bd did not create
// holds that name (anyone who may create Bundles can compute it): then it
// is <bd>-<random suffix>, and a name taken by the time of the create is
// given up for another. The Bundle for the template is then found by its
// record in status.generatedBundles and its template-hash label. Someone
// else's Bundle under either name is never installed, adopted or deleted.
func (r *Reconciler) desiredBundle(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, flush func() error) (*rukpakv1alpha1.Bundle, error) {
	hash, err := TemplateHash(bd.Spec.Template)
	if err != nil {
		return nil, err
	}
	name := bd.Name + "-" + hash
	if err := r.migrate(ctx, bd, name); err != nil {
		return nil, err
	}
	existing := &rukpakv1alpha1.Bundle{}
	err = r.Client.Get(ctx, client.ObjectKey{Name: name}, existing)
	switch {
	case err == nil:
		if b, err := r.claim(bd, hash, existing, flush); b != nil || err != nil {
			return b, err
		}
		// Someone else's: the template's Bundle has another name.
		name = ""
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading bundle %q: %w", name, err)
	}
	if b, err := r.recordedFor(ctx, bd, hash, flush); b != nil || err != nil {
		return b, err
	}

	owned, err := r.ownedBundles(ctx, bd)
	if err != nil {
		return nil, err
	}
	if err := r.trimBundles(ctx, bd, owned); err != nil {
		return nil, err
	}
	for range nameAttempts {
		if name == "" {
			if name, err = randomName(bd.Name); err != nil {
				return nil, err
			}
		}
		if b, err := r.create(ctx, bd, name, hash, flush); b != nil || err != nil {
			return b, err
		}
		name = ""
	}
	return nil, fmt.Errorf("creating a bundle for the template: %d names in a row were taken by bundles this bundle deployment did not create", nameAttempts)
}

// create creates the Bundle of bd's template (whose hash is hash) under
// name, recording the intent first. It returns nil and no error when the
// name turns out to be taken by a Bundle bd did not create.
func (r *Reconciler) create(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, name, hash string, flush func() error) (*rukpakv1alpha1.Bundle, error) {
	b := &rukpakv1alpha1.Bundle{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{},
			Annotations: map[string]string{},
		},
		Spec: *bd.Spec.Template.Spec.DeepCopy(),
	}
	// Copy, never alias, the template's maps: the BundleDeployment in the
	// cache must not change under anyone's feet.
	for k, v := range bd.Spec.Template.Metadata.Labels {
		b.Labels[k] = v
	}
	for k, v := range bd.Spec.Template.Metadata.Annotations {
		b.Annotations[k] = v
	}
	// On bd's shard, whatever the template's labels say.
	r.Shard.Stamp(bd.Labels, b.Labels)
	b.Labels[rukpakv1alpha1.LabelOwnerKind] = "BundleDeployment"
	b.Labels[rukpakv1alpha1.LabelOwnerName] = bd.Name
	b.Labels[rukpakv1alpha1.LabelBundleTemplateHash] = hash
	if err := controllerutil.SetControllerReference(bd, b, r.Client.Scheme()); err != nil {
		return nil, err
	}
	r.withFinalizer(b)

	g, recorded := recordOf(bd, name)
	// The first Bundle's intent may be stored already, in the annotation
	// the finalizer's patch wrote (intent.go).
	annotated := !recorded && annotatedIntent(bd, &bd.Status) == name
	if !recorded && !annotated {
		r.record(bd, name, "")
		if err := flush(); err != nil {
			return nil, fmt.Errorf("recording the creation of bundle %q: %w", name, err)
		}
	}
	if err := r.Client.Create(ctx, b); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating bundle %q: %w", name, err)
		}
		if g.UID == "" {
			// Only an intent was recorded and the create failed: this is
			// someone else's Bundle, whatever it says about itself.
			r.forget(bd, name)
		}
		if annotated {
			if err := r.dropIntent(ctx, bd); err != nil {
				return nil, err
			}
		}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, b); err != nil {
			if apierrors.IsNotFound(err) {
				// Created by someone else after the cache was read.
				return nil, nil
			}
			return nil, fmt.Errorf("reading bundle %q: %w", name, err)
		}
		if created(bd, b) {
			// bd's own, not yet in the cache when this reconcile looked.
			return b, checkSpec(bd, b)
		}
		return nil, nil
	}
	// The UID goes out with the next status write that has something else
	// to say (writes.go): the intent is already stored, so a crash before
	// that write is the window the intent covers. No event: an event is a
	// write too, and the install's event names the Bundle.
	r.record(bd, name, b.UID)
	return b, nil
}

// claim decides whether existing, found under the name the template whose
// hash is hash generates first, is bd's Bundle for it: nil and no error if
// it is not bd's (or is bd's, for another template).
func (r *Reconciler) claim(bd *rukpakv1alpha1.BundleDeployment, hash string, existing *rukpakv1alpha1.Bundle, flush func() error) (*rukpakv1alpha1.Bundle, error) {
	if created(bd, existing) {
		if h := existing.Labels[rukpakv1alpha1.LabelBundleTemplateHash]; h != "" && h != hash {
			// A random name of another template's Bundle (randomName)
			// that happens to be this template's first.
			return nil, nil
		}
		return existing, checkSpec(bd, existing)
	}
	g, ok := recordOf(bd, existing.Name)
	switch {
	case ok && g.UID != "":
		// bd's own was deleted, and someone else created one under its
		// name.
		return nil, nil
	case !ok && (annotatedIntent(bd, &bd.Status) != existing.Name || !generatedFor(bd, existing)):
		// No intent, or one in the annotation, which anyone editing bd
		// may write, for a Bundle that does not even say it is bd's
		// (intent.go).
		return nil, nil
	}
	// An intent without a UID: the provisioner stopped between recording
	// the intent and recording the Bundle it created (see the comment at
	// the top of this file).
	return r.adoptIntended(bd, existing, flush)
}

// adoptIntended records existing, found under the name of an intent bd
// recorded without a UID, as bd's if its spec is the template's; nil if
// it is not.
func (r *Reconciler) adoptIntended(bd *rukpakv1alpha1.BundleDeployment, existing *rukpakv1alpha1.Bundle, flush func() error) (*rukpakv1alpha1.Bundle, error) {
	if !equality.Semantic.DeepEqual(existing.Spec, bd.Spec.Template.Spec) {
		return nil, nil
	}
	r.record(bd, existing.Name, existing.UID)
	if err := flush(); err != nil {
		return nil, fmt.Errorf("recording bundle %q: %w", existing.Name, err)
	}
	return existing, nil
}

// recordedFor finds, among the Bundles bd recorded (or intended), its
// Bundle for the template whose hash is hash under a name other than the
// one the template generates first: one bd created, or one bd intended to
// create (an intent without a UID) that is controlled by bd and carries
// the template's spec.
func (r *Reconciler) recordedFor(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, hash string, flush func() error) (*rukpakv1alpha1.Bundle, error) {
	first := bd.Name + "-" + hash
	var intended *rukpakv1alpha1.Bundle
	for _, g := range bd.Status.GeneratedBundles {
		if g.Name == first {
			continue
		}
		b := &rukpakv1alpha1.Bundle{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: g.Name}, b); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("reading bundle %q: %w", g.Name, err)
		}
		switch {
		case b.Labels[rukpakv1alpha1.LabelBundleTemplateHash] != hash:
		case created(bd, b):
			return b, checkSpec(bd, b)
		case g.UID == "" && intended == nil && metav1.IsControlledBy(b, bd):
			intended = b
		}
	}
	if intended == nil {
		return nil, nil
	}
	return r.adoptIntended(bd, intended, flush)
}

// randomName is a name for a Bundle of bd that no one can compute ahead:
// bd's name and a suffix of hashLength characters of alphabet, from
// crypto/rand (27^6, about 3.9e8, names per BundleDeployment).
func randomName(bd string) (string, error) {
	const limit = 256 - 256%len(alphabet) // unbiased: bytes below a multiple of len(alphabet)
	out := make([]byte, 0, hashLength)
	buf := make([]byte, 2*hashLength)
	for len(out) < hashLength {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("choosing a bundle name: %w", err)
		}
		for _, c := range buf {
			if int(c) < limit && len(out) < hashLength {
				out = append(out, alphabet[int(c)%len(alphabet)])
			}
		}
	}
	return bd + "-" + string(out), nil
}

// migrate records the Bundles of a BundleDeployment installed before
// status.generatedBundles existed (it has an active Bundle and no records),
// by the rule of the provisioner that created them: controlled by bd. Only
// two are taken: the active one, whose content is installed already, and
// the one for the current template if its spec is the template's (a rollout
// in flight during the upgrade). Any other Bundle, for example one created
// ahead of a template not written yet, is left unrecorded and so is never
// installed. The first reconcile after the upgrade does this, once.
func (r *Reconciler) migrate(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, desired string) error {
	if len(bd.Status.GeneratedBundles) > 0 || bd.Status.ActiveBundle == "" {
		return nil
	}
	for _, name := range []string{bd.Status.ActiveBundle, desired} {
		b := &rukpakv1alpha1.Bundle{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, b); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("reading bundle %q: %w", name, err)
		}
		if !metav1.IsControlledBy(b, bd) || (name != bd.Status.ActiveBundle && !equality.Semantic.DeepEqual(b.Spec, bd.Spec.Template.Spec)) {
			continue
		}
		if _, ok := recordOf(bd, name); !ok {
			r.record(bd, name, b.UID)
		}
	}
	return nil
}

// ownedBundles lists the Bundles this reconciler created for bd: labelled
// for it, and recorded by UID.
func (r *Reconciler) ownedBundles(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment) ([]rukpakv1alpha1.Bundle, error) {
	list := &rukpakv1alpha1.BundleList{}
	// Anyone who may create Bundles may label them for bd: copy only those
	// bd created, not every Bundle so labelled.
	if err := r.Client.List(ctx, list, client.MatchingFields{bundleOwnerIndex: bd.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing bundles of %q: %w", bd.Name, err)
	}
	var owned []rukpakv1alpha1.Bundle
	for i := range list.Items {
		if b := &list.Items[i]; created(bd, b) {
			owned = append(owned, *b.DeepCopy())
		}
	}
	return owned, nil
}

// trimBundles makes room for one more generated Bundle by deleting the
// oldest ones that are not active.
func (r *Reconciler) trimBundles(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, owned []rukpakv1alpha1.Bundle) error {
	limit := r.maxBundles()
	if len(owned) < limit {
		return nil
	}
	sort.Slice(owned, func(i, j int) bool { return owned[i].CreationTimestamp.Before(&owned[j].CreationTimestamp) })
	excess := len(owned) - limit + 1
	for i := range owned {
		if excess == 0 {
			break
		}
		if owned[i].Name == bd.Status.ActiveBundle {
			continue
		}
		if err := r.deleteBundle(ctx, bd, &owned[i]); err != nil {
			return fmt.Errorf("deleting old bundle %q: %w", owned[i].Name, err)
		}
		r.event(bd, "Warning", rukpakv1alpha1.ReasonTooManyBundles,
			fmt.Sprintf("Deleted bundle %q: at most %d generated bundles are kept, and it is the oldest that is not active", owned[i].Name, limit))
		excess--
	}
	return nil
}

// pivot deletes every generated Bundle but the one just installed and one
// whose pivot waits for approval.
func (r *Reconciler) pivot(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, active *rukpakv1alpha1.Bundle) error {
	owned, err := r.ownedBundles(ctx, bd)
	if err != nil {
		return err
	}
	for i := range owned {
		if owned[i].Name == active.Name || owned[i].Name == bd.Status.PendingBundle {
			continue
		}
		if err := r.deleteBundle(ctx, bd, &owned[i]); err != nil {
			return fmt.Errorf("deleting superseded bundle %q: %w", owned[i].Name, err)
		}
		r.event(bd, "Normal", "BundleSuperseded", fmt.Sprintf("Deleted bundle %q after pivoting to %q", owned[i].Name, active.Name))
	}
	return nil
}

// deleteBundle deletes one of bd's own Bundles, with its UID as a
// precondition: a Bundle someone recreated under the name in the meantime
// is not bd's to delete.
func (r *Reconciler) deleteBundle(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, b *rukpakv1alpha1.Bundle) error {
	err := r.Client.Delete(ctx, b, client.Preconditions{UID: &b.UID})
	if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return err
	}
	r.forget(bd, b.Name)
	return nil
}
