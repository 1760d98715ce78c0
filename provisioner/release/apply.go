package release

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
func ApplyObject(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	patch, err := json.Marshal(o.Object)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", describe(o), err)
	}
	answer := &unstructured.Unstructured{}
	answer.SetGroupVersionKind(o.GroupVersionKind())
	answer.SetNamespace(o.GetNamespace())
	answer.SetName(o.GetName())
	return c.Patch(ctx, answer, client.RawPatch(types.ApplyPatchType, patch),
		client.FieldOwner(FieldManager), client.ForceOwnership, client.FieldValidation(metav1.FieldValidationIgnore))
}

// applyConcurrency bounds the requests in flight for one release; the API
// server's priority and fairness protects it from more.
const applyConcurrency = 64

// applyObjects makes the cluster hold objs (already stamped with the
// release's ownership metadata) and deletes what previous held that objs no
// longer does. It goes in three waves: Namespaces; CRDs, waited for until
// Established (a bundle may ship a CRD with custom resources of it, which
// could not even be mapped before); then everything else. Within a wave
// objects are applied in parallel, each after an ownership check (Helm's
// rule: an existing object must belong to this release) answered by one
// metadata LIST per kind and namespace, instead of Helm's sequential
// GET-then-create per object.
func (m *Manager) applyObjects(ctx context.Context, name string, objs, previous []*unstructured.Unstructured) error {
	owned := map[string]bool{}
	for _, o := range previous {
		owned[key(o)] = true
	}
	var namespaces, crds, rest []*unstructured.Unstructured
	for _, o := range objs {
		switch {
		case o.GetAPIVersion() == "v1" && o.GetKind() == "Namespace":
			namespaces = append(namespaces, o)
		case o.GroupVersionKind().GroupKind() == apiextensionsv1.Kind("CustomResourceDefinition"):
			crds = append(crds, o)
		default:
			rest = append(rest, o)
		}
	}
	if err := m.applyWave(ctx, name, namespaces, owned); err != nil {
		return err
	}
	if err := m.applyWave(ctx, name, crds, owned); err != nil {
		return err
	}
	if err := m.waitEstablished(ctx, crds); err != nil {
		return err
	}
	if err := m.applyWave(ctx, name, rest, owned); err != nil {
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
	return parallel(stale, func(o *unstructured.Unstructured) error {
		err := m.client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting %s, no longer in the bundle: %w", describe(o), err)
		}
		return nil
	})
}

// applyWave applies objs in parallel, refusing any that exist and belong
// neither to this release nor to its previous revision.
func (m *Manager) applyWave(ctx context.Context, name string, objs []*unstructured.Unstructured, owned map[string]bool) error {
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
		if live != nil && !owned[key(o)] && !ownedBy(live, name, m.namespace) {
			return fmt.Errorf("%s exists and is not managed by this release (%s/%s): delete it or remove it from the bundle", describe(o), m.namespace, name)
		}
		if err := ApplyObject(ctx, m.client, o); err != nil {
			return fmt.Errorf("applying %s: %w", describe(o), err)
		}
		return nil
	})
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
	return errors.Join(errs...)
}

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
	type group struct {
		gvk       schema.GroupVersionKind
		namespace string
	}
	groups := map[group][]*unstructured.Unstructured{}
	for _, o := range objs {
		g := group{o.GroupVersionKind(), o.GetNamespace()}
		groups[g] = append(groups[g], o)
	}
	found := map[string]*metav1.PartialObjectMetadata{}
	for g, members := range groups {
		if len(members) < listThreshold {
			continue
		}
		byName, complete, err := m.listMetadata(ctx, g.gvk, g.namespace, len(members))
		if err != nil {
			if meta.IsNoMatchError(err) {
				return nil, err
			}
			continue // fall back to one GET each
		}
		for _, o := range members {
			if live, ok := byName[o.GetName()]; ok || complete {
				found[key(o)] = live
			}
		}
	}
	return found, nil
}

// listMetadata lists the metadata of gvk in namespace in pages of n,
// stopping once the namespace turns out to hold more than listFactor*n of
// them. complete says whether every object was seen (so an absent name does
// not exist); otherwise the names seen so far are still an answer for those.
func (m *Manager) listMetadata(ctx context.Context, gvk schema.GroupVersionKind, namespace string, n int) (map[string]*metav1.PartialObjectMetadata, bool, error) {
	byName := map[string]*metav1.PartialObjectMetadata{}
	cont := ""
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := m.client.List(ctx, list, client.InNamespace(namespace), client.Limit(int64(n)), client.Continue(cont)); err != nil {
			return nil, false, err
		}
		for i := range list.Items {
			byName[list.Items[i].Name] = &list.Items[i]
		}
		cont = list.Continue
		if cont == "" {
			return byName, true, nil
		}
		left := list.GetRemainingItemCount()
		if left == nil || int64(len(byName))+*left > int64(listFactor*n) {
			return byName, false, nil
		}
	}
}

func ownedBy(live metav1.Object, name, namespace string) bool {
	a := live.GetAnnotations()
	return a[helmReleaseName] == name && a[helmReleaseNamespace] == namespace
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

// decodeManifest reads a release manifest back into objects.
func decodeManifest(manifest string) ([]*unstructured.Unstructured, error) {
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
		// apimachinery's JSON keeps integers int64, as Kubernetes has them.
		u := &unstructured.Unstructured{}
		if err := utiljson.Unmarshal(raw, &u.Object); err != nil {
			return nil, fmt.Errorf("decoding release manifest: %w", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}
