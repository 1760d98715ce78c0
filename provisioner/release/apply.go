package release

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/rukpak-dev/rukpak/internal/jsonmap"
)

// FieldManager owns every field the provisioner applies, on install,
// upgrade and drift correction alike, so a field dropped from a bundle is
// dropped from the cluster by the next apply.
const FieldManager = "rukpak"

// ApplyObject server-side applies o as the provisioner does everywhere: as
// FieldManager, taking over conflicting fields, and without server-side
// field validation. The API server parses an apply patch as YAML, and with
// validation (its default is to warn) parses it a second time, strictly,
// only to produce warnings no one reads here; skipping that made applying
// 1,000 objects ~10% faster. o is left as it is: it stays the desired
// state, which drift correction compares with.
//
// The API server answers with the applied object, which nothing here reads:
// it is asked for the object's metadata only. Decoding whole answers, 64
// applies at a time, held several times a bundle's CRDs on the heap (a
// CRD's schema can be 1 MB, and its managedFields repeat every field).
func ApplyObject(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	_, err := applyObject(ctx, c, o, nil)
	return err
}

// ApplyObjectAt is ApplyObject, returning where the apply left the object.
func ApplyObjectAt(ctx context.Context, c client.Client, o *unstructured.Unstructured) (Applied, error) {
	return applyObject(ctx, c, o, nil)
}

// Applied is where an apply left an object: the object then holds exactly
// what was applied.
type Applied struct {
	ResourceVersion string
	// UID and Generation, for a kind whose generation moves on every change
	// of its fields other than metadata and status: while the object has
	// both, those fields are still as applied.
	UID        types.UID
	Generation int64
	// Established is, for a CRD, the resourceVersion at which it was read
	// Established (and its names not refused), still as applied: the same
	// UID and generation, not being deleted, with the labels and
	// annotations applied. Its health and drift are known there without
	// reading it again.
	Established string
}

// applyObject is ApplyObject, returning where the apply left the object.
// body is o's JSON if the caller has it (render), nil to encode it here.
func applyObject(ctx context.Context, c client.Client, o *unstructured.Unstructured, body []byte) (Applied, error) {
	patch := body
	if patch == nil {
		var err error
		if patch, err = jsonmap.Marshal(o.Object); err != nil {
			return Applied{}, fmt.Errorf("encoding %s: %w", describe(o), err)
		}
	}
	answer := &metav1.PartialObjectMetadata{}
	answer.SetGroupVersionKind(o.GroupVersionKind())
	answer.SetNamespace(o.GetNamespace())
	answer.SetName(o.GetName())
	if err := c.Patch(ctx, answer, client.RawPatch(types.ApplyPatchType, patch),
		client.FieldOwner(FieldManager), client.ForceOwnership, client.FieldValidation(metav1.FieldValidationIgnore)); err != nil {
		return Applied{}, err
	}
	return Applied{ResourceVersion: answer.ResourceVersion, UID: answer.UID, Generation: answer.Generation}, nil
}

// place settles o's namespace. A namespace on a cluster-scoped object (a
// common slip in real bundles) is dropped, as Helm does. Unlike Helm, a
// namespaced object without a namespace is an error, not installed into the
// release namespace: that is the provisioner's own, holding the release
// records and the credentials Bundles use, where a bundle's Secret shaped
// like a release record would make a later uninstall delete objects of the
// bundle's choosing. For the same reason nothing is installed there at all.
// Unknown kinds are left for the apply to report as missing.
func (m *Manager) place(o *unstructured.Unstructured, scopes map[schema.GroupVersionKind]scope) error {
	gvk := o.GroupVersionKind()
	sc, ok := scopes[gvk]
	if !ok {
		sc.namespaced, sc.err = m.client.IsObjectNamespaced(o)
		scopes[gvk] = sc
	}
	namespaced, err := sc.namespaced, sc.err
	switch {
	case meta.IsNoMatchError(err):
	case err != nil:
		return fmt.Errorf("finding the scope of %s: %w", describe(o), err)
	case namespaced && o.GetNamespace() == "":
		return fmt.Errorf("%s %s has no namespace: set metadata.namespace in the bundle, or an install namespace for objects without one (spec.config.installNamespace)", o.GetKind(), o.GetName())
	case !namespaced:
		o.SetNamespace("")
	}
	if o.GetNamespace() == m.namespace {
		return fmt.Errorf("%s is in the provisioner's namespace %q, which holds release records and credentials: bundles may not install objects there", describe(o), m.namespace)
	}
	return nil
}

// scope is what the RESTMapper said of a kind: namespaced or not, or why
// it could not tell.
type scope struct {
	namespaced bool
	err        error
}

// applyConcurrency bounds the requests in flight for one release; the API
// server's priority and fairness protects it from more.
const applyConcurrency = 64

// applyObjects makes the cluster hold objs (already stamped with the
// release's ownership metadata) and deletes what previous held that objs no
// longer does, if it is still the release's. It goes in waves: Namespaces;
// CRDs, waited for until Established (a bundle may ship a CRD with custom
// resources of it, which could not even be mapped before); Roles and
// ClusterRoles; everything else; and last the webhook configurations and
// APIServices (deleted first, too). Within a wave
// objects are applied in parallel, each after an ownership check (Helm's
// rule: an existing object must belong to this release) answered by one
// metadata LIST per kind and namespace, instead of Helm's sequential
// GET-then-create per object.
//
// An object refused for fields the API server's schema does not declare is
// applied without them (applyDropping), in place in objs; dropped collects
// which.
func (m *Manager) applyObjects(ctx context.Context, name string, objs []*unstructured.Unstructured, sent bodies, previous []*unstructured.Unstructured, dropped *droppedSet) error {
	var namespaces, crds, roles, rest []*unstructured.Unstructured
	for _, o := range objs {
		switch gk := o.GroupVersionKind().GroupKind(); {
		case o.GetAPIVersion() == "v1" && o.GetKind() == "Namespace":
			namespaces = append(namespaces, o)
		case gk == apiextensionsv1.Kind("CustomResourceDefinition"):
			crds = append(crds, o)
		case gk.Group == rbacv1.GroupName && (gk.Kind == "Role" || gk.Kind == "ClusterRole"):
			roles = append(roles, o)
		default:
			rest = append(rest, o)
		}
	}
	if err := m.applyWave(ctx, name, namespaces, sent, dropped); err != nil {
		return err
	}
	if err := m.applyWave(ctx, name, crds, sent, dropped); err != nil {
		return err
	}
	// The kinds of objects the rest of the release holds: those of its own
	// CRDs must be mapped before they are applied.
	used := map[schema.GroupKind]bool{}
	for _, o := range rest {
		used[o.GroupVersionKind().GroupKind()] = true
	}
	if err := m.waitEstablished(ctx, crds, used, dropped); err != nil {
		return err
	}
	// Roles before bindings: the API server refuses a binding of a role
	// that does not exist yet unless its creator may bind it, which an
	// impersonated identity (As) usually may not.
	if err := m.applyWave(ctx, name, roles, sent, dropped); err != nil {
		return err
	}
	// Webhook configurations and APIServices last: the API server calls
	// what they name as soon as they exist, and objects they match
	// (the serving certificate's Secret, for one) must not wait for it.
	served, rest := servedFirst(rest)
	if err := m.applyWave(ctx, name, rest, sent, dropped); err != nil {
		return err
	}
	if err := m.applyWave(ctx, name, served, sent, dropped); err != nil {
		return err
	}

	wanted := map[string]bool{}
	for _, o := range objs {
		wanted[key(o)] = true
	}
	var stale []*unstructured.Unstructured
	for _, o := range previous {
		if !wanted[key(o)] {
			stale = append(stale, o)
		}
	}
	del := func(o *unstructured.Unstructured) error {
		kept, err := m.DeleteIfOwned(ctx, o, name)
		if err != nil {
			return fmt.Errorf("deleting %s, no longer in the bundle: %w", describe(o), err)
		}
		if kept != "" {
			log.FromContext(ctx).Info("not deleting an object dropped from the bundle that the release no longer owns", "release", name, "object", kept)
		}
		return nil
	}
	first, rest := servedFirst(stale)
	if err := parallel(first, del); err != nil {
		return err
	}
	return parallel(rest, del)
}

// applyWave applies objs in parallel, refusing any that exist without this
// release's ownership metadata. Helm's upgrade also takes an object that
// the previous revision's record lists, whatever the object says: that is
// how a rollback took over an object another release had installed since,
// and how a record listing someone else's objects would hand them over.
func (m *Manager) applyWave(ctx context.Context, name string, objs []*unstructured.Unstructured, sent bodies, dropped *droppedSet) error {
	existing, err := m.existing(ctx, objs)
	if err != nil {
		return err
	}
	return parallel(objs, func(o *unstructured.Unstructured) error {
		live, known := existing[key(o)]
		if !known {
			live = &metav1.PartialObjectMetadata{}
			live.SetGroupVersionKind(o.GroupVersionKind())
			if err := m.client.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
				if !apierrors.IsNotFound(err) {
					return fmt.Errorf("reading %s: %w", describe(o), err)
				}
				live = nil
			}
		}
		if live != nil && !ownedBy(live, name, m.namespace) {
			if ns, other := Owner(live); other != "" {
				return fmt.Errorf("%s exists and is not managed by this release (%s/%s): it is owned by release %s/%s; delete it or remove it from the bundle", describe(o), m.namespace, name, ns, other)
			}
			return fmt.Errorf("%s exists and is not managed by this release (%s/%s): delete it or remove it from the bundle", describe(o), m.namespace, name)
		}
		fields, at, err := applyDropping(ctx, m.client, o, sent[o])
		if err != nil {
			return fmt.Errorf("applying %s: %w", describe(o), err)
		}
		dropped.add(o, fields)
		dropped.applied(o, at)
		if live == nil {
			dropped.created(o)
		}
		return nil
	})
}

// droppedSet collects the fields objects were applied without, and where
// each apply left its object, from parallel applies.
type droppedSet struct {
	mu       sync.Mutex
	list     []DroppedFields
	versions map[string]Applied
	// made are the objects the apply created (absent when read first).
	made map[string]bool
}

func (d *droppedSet) created(o *unstructured.Unstructured) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.made == nil {
		d.made = map[string]bool{}
	}
	d.made[key(o)] = true
}

func (d *droppedSet) applied(o *unstructured.Unstructured, at Applied) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.versions == nil {
		d.versions = map[string]Applied{}
	}
	d.versions[key(o)] = at
}

// version is the resourceVersion the apply of o answered ("" if none),
// and whether that apply created it.
func (d *droppedSet) version(o *unstructured.Unstructured) (string, bool) {
	if d == nil {
		return "", false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.versions[key(o)].ResourceVersion, d.made[key(o)]
}

// established notes where the CRD o, applied, was read Established.
func (d *droppedSet) established(o *unstructured.Unstructured, seen *crdSeen) {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.versions[key(o)]
	if !ok || seen == nil || seen.namesRefused || seen.UID != at.UID || seen.Generation != at.Generation || seen.DeletionTimestamp != nil ||
		!holds(seen.Labels, o.GetLabels()) || !holds(seen.Annotations, o.GetAnnotations()) {
		return
	}
	at.Established = seen.ResourceVersion
	d.versions[key(o)] = at
}

// holds says whether every entry of want is in got.
func holds(got, want map[string]string) bool {
	for k, v := range want {
		if w, ok := got[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func (d *droppedSet) add(o *unstructured.Unstructured, fields []string) {
	if len(fields) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.list = append(d.list, DroppedFields{Object: describe(o), Fields: fields, Ref: corev1.ObjectReference{
		APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(),
	}})
}

// sorted returns the collected fields by object, the same on every attempt.
func (d *droppedSet) sorted() []DroppedFields {
	d.mu.Lock()
	defer d.mu.Unlock()
	sort.Slice(d.list, func(i, j int) bool { return d.list[i].Object < d.list[j].Object })
	return d.list
}

// parallel runs f on every object with bounded concurrency and joins the
// errors.
func parallel(objs []*unstructured.Unstructured, f func(*unstructured.Unstructured) error) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, applyConcurrency)
	)
	for _, o := range objs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(o); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) == 0 {
		return nil
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return &manyErrors{errs}
}

// shownErrors bounds the errors a message lists: a bundle of 2,000
// conflicting objects made a 344 KB message, cut short (mid-word) by the
// status condition's limit.
const shownErrors = 10

// manyErrors is errors.Join with a bounded message, sorted so the message
// is the same on every attempt; errors.Is and errors.As still see them all.
type manyErrors struct{ errs []error }

func (e *manyErrors) Error() string {
	var b strings.Builder
	for i, err := range e.errs[:min(len(e.errs), shownErrors)] {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(err.Error())
	}
	if len(e.errs) > shownErrors {
		fmt.Fprintf(&b, "\nand %d more", len(e.errs)-shownErrors)
	}
	return b.String()
}

func (e *manyErrors) Unwrap() []error { return e.errs }

// listThreshold is how many objects of one kind in one namespace make a
// metadata LIST cheaper than a GET each.
const listThreshold = 8

// listFactor bounds what an ownership LIST may read: at most this many times
// the objects it answers for. A namespace shared with many other objects is
// checked with GETs instead, so installing N objects costs O(N) however full
// the namespace is.
const listFactor = 4

// existing finds which objects already exist, with their metadata, using
// metadata-only LISTs per kind and namespace that holds many of them.
// Objects it has no answer for (small groups, crowded namespaces, kinds not
// listable) are absent from the map and looked up one by one; objects known
// not to exist map to nil.
func (m *Manager) existing(ctx context.Context, objs []*unstructured.Unstructured) (map[string]*metav1.PartialObjectMetadata, error) {
	groups := map[kindInNamespace][]*unstructured.Unstructured{}
	for _, o := range objs {
		g := kindInNamespace{o.GroupVersionKind(), o.GetNamespace()}
		groups[g] = append(groups[g], o)
	}
	found := map[string]*metav1.PartialObjectMetadata{}
	for g, members := range groups {
		if len(members) < listThreshold || m.crowded.tooMany(g, len(members)) {
			continue
		}
		byName, complete, total, err := m.listMetadata(ctx, g.gvk, g.namespace, len(members))
		if err != nil {
			if meta.IsNoMatchError(err) {
				return nil, err
			}
			continue // fall back to one GET each
		}
		if !complete && total > 0 {
			m.crowded.saw(g, total)
		}
		for _, o := range members {
			if live, ok := byName[o.GetName()]; ok || complete {
				found[key(o)] = live
			}
		}
	}
	return found, nil
}

// kindInNamespace is a kind in one namespace ("" for cluster-scoped).
type kindInNamespace struct {
	gvk       schema.GroupVersionKind
	namespace string
}

// crowdedFor is how long a kind in a namespace found crowded is checked
// with GETs without listing again: a namespace that empties is listed
// again after that long.
const crowdedFor = 10 * time.Minute

// crowdedKinds remembers the kinds and namespaces whose ownership LIST
// stopped because they hold more than listFactor times the objects asked
// about, and how many they held: the next release of a few objects there
// checks with GETs at once, instead of a LIST that finds the same again.
// The API server answers that LIST (a page, with the count of the rest)
// from every object of the kind in the namespace, so in one shared by
// thousands of BundleDeployments each install's LIST cost O(N) (issue 15).
type crowdedKinds struct {
	mu   sync.Mutex
	seen map[kindInNamespace]crowding
}

type crowding struct {
	total int64
	at    time.Time
}

// tooMany says whether g was found to hold more than listFactor*n objects
// less than crowdedFor ago.
func (c *crowdedKinds) tooMany(g kindInNamespace, n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.seen[g]
	if !ok || time.Since(s.at) > crowdedFor {
		delete(c.seen, g)
		return false
	}
	return s.total > int64(listFactor*n)
}

// saw notes that g held total objects.
func (c *crowdedKinds) saw(g kindInNamespace, total int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[g] = crowding{total: total, at: time.Now()}
}

// listMetadata lists the metadata of gvk in namespace in pages of n,
// stopping once the namespace turns out to hold more than listFactor*n of
// them. complete says whether every object was seen (so an absent name does
// not exist); otherwise the names seen so far are still an answer for those,
// and total is how many the namespace holds (0 if the API server did not
// say).
func (m *Manager) listMetadata(ctx context.Context, gvk schema.GroupVersionKind, namespace string, n int) (byName map[string]*metav1.PartialObjectMetadata, complete bool, total int64, err error) {
	byName = map[string]*metav1.PartialObjectMetadata{}
	cont := ""
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := m.client.List(ctx, list, client.InNamespace(namespace), client.Limit(int64(n)), client.Continue(cont)); err != nil {
			return nil, false, 0, err
		}
		for i := range list.Items {
			byName[list.Items[i].Name] = &list.Items[i]
		}
		cont = list.Continue
		if cont == "" {
			return byName, true, int64(len(byName)), nil
		}
		left := list.GetRemainingItemCount()
		if left == nil {
			return byName, false, 0, nil
		}
		if total = int64(len(byName)) + *left; total > int64(listFactor*n) {
			return byName, false, total, nil
		}
	}
}

func ownedBy(live metav1.Object, name, namespace string) bool {
	a := live.GetAnnotations()
	return a[helmReleaseName] == name && a[helmReleaseNamespace] == namespace
}

// Owner returns the Helm release that o's ownership annotations name; an
// empty name if none.
func Owner(o metav1.Object) (namespace, name string) {
	a := o.GetAnnotations()
	return a[helmReleaseNamespace], a[helmReleaseName]
}

// Live reads o's metadata from the API server (not a cache); nil if it
// does not exist.
func (m *Manager) Live(ctx context.Context, o *unstructured.Unstructured) (*metav1.PartialObjectMetadata, error) {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(o.GroupVersionKind())
	err := m.client.Get(ctx, client.ObjectKeyFromObject(o), live)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return live, nil
}

// deleteAttempts bounds the retries of a delete whose object was replaced
// between the ownership check and the delete.
const deleteAttempts = 3

// DeleteIfOwned deletes o (its kind, namespace and name) if the live object
// carries release name's ownership metadata, and otherwise leaves it alone
// and says why (kept is empty when o was deleted or is gone). Ownership is
// checked on the live object, not on what any release record lists: a
// record lists what a release once applied, not what it still owns, and
// Helm's own uninstall, trusting the record, deleted objects that another
// release had installed since. The delete is conditional on the checked
// object's UID, so an object deleted and re-created by someone else in
// between is not deleted. (Not on its resourceVersion: status updates of
// busy objects would fail most deletes; taking over an object in place is
// what the release's own ownership check refuses.)
func (m *Manager) DeleteIfOwned(ctx context.Context, o *unstructured.Unstructured, name string) (kept string, err error) {
	for range deleteAttempts {
		live, err := m.Live(ctx, o)
		switch {
		case err != nil:
			return "", fmt.Errorf("reading %s: %w", describe(o), err)
		case live == nil || !live.DeletionTimestamp.IsZero():
			return "", nil
		case !ownedBy(live, name, m.namespace):
			if ns, other := Owner(live); other != "" {
				return fmt.Sprintf("%s (owned by release %s/%s)", describe(o), ns, other), nil
			}
			return fmt.Sprintf("%s (no ownership metadata of release %s/%s)", describe(o), m.namespace, name), nil
		}
		// Deleted as unstructured: the API server answers a delete with the
		// object (a Service, a custom resource), which a typed delete of
		// live would decode with the client's scheme, failing after the
		// object is gone.
		target := &unstructured.Unstructured{}
		target.SetGroupVersionKind(o.GroupVersionKind())
		target.SetNamespace(live.Namespace)
		target.SetName(live.Name)
		err = m.client.Delete(ctx, target, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &live.UID})
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return "", nil
		case !apierrors.IsConflict(err):
			return "", fmt.Errorf("deleting %s: %w", describe(o), err)
		}
	}
	return "", fmt.Errorf("deleting %s: it kept being replaced between the ownership check and the delete", describe(o))
}

func key(o *unstructured.Unstructured) string {
	gvk := o.GroupVersionKind()
	return gvk.Group + "/" + gvk.Kind + "/" + o.GetNamespace() + "/" + o.GetName()
}

func describe(o *unstructured.Unstructured) string {
	if ns := o.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", o.GetKind(), ns, o.GetName())
	}
	return fmt.Sprintf("%s %s", o.GetKind(), o.GetName())
}

// decodeManifest reads a release manifest back into objects: one of
// Manifest's JSON documents without a YAML parser, anything else (releases
// recorded by earlier versions, a chart's files) as YAML.
func decodeManifest(manifest string) ([]*unstructured.Unstructured, error) {
	if jsonManifest(manifest) {
		if objs, err := decodeJSONManifest(manifest); err == nil {
			return objs, nil
		}
		// YAML that starts like Manifest's JSON: flow style, a comment
		// after a separator, a YAML document after a JSON one.
	}
	return decodeYAMLManifest(manifest)
}

// decodeJSONManifest reads Manifest's format: documents of one JSON value
// each, after "---" lines.
func decodeJSONManifest(manifest string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for rest := manifest; rest != ""; {
		rest = strings.TrimPrefix(rest, docSeparator)
		doc, next, found := strings.Cut(rest, "\n"+docSeparator)
		if found {
			next = docSeparator + next
		}
		rest = next
		// apimachinery's JSON keeps integers int64, as Kubernetes has them.
		fields, err := jsonmap.Unmarshal([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("decoding release manifest: document %d: %w", len(objs), err)
		}
		u := &unstructured.Unstructured{Object: fields}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs, nil
}

// decodeYAMLManifest reads a manifest of YAML documents.
func decodeYAMLManifest(manifest string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var objs []*unstructured.Unstructured
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decoding release manifest: %w", err)
		}
		if len(raw) == 0 {
			continue // an empty document
		}
		fields, err := jsonmap.Unmarshal(raw)
		if err != nil {
			return nil, fmt.Errorf("decoding release manifest: %w", err)
		}
		u := &unstructured.Unstructured{Object: fields}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}
