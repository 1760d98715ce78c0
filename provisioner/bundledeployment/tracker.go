package bundledeployment

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// Tracker watches the kinds BundleDeployments installed, so a deleted or
// edited object brings its BundleDeployment back for drift correction and
// health updates. Its cache holds only objects labelled as installed by a
// BundleDeployment, which keeps memory proportional to what was installed,
// not to the cluster.
//
// Kinds the scheme knows (the built-in ones) are watched as typed objects,
// which the API server sends as protobuf: for the watch events of a
// 1,000-object install that is far cheaper to encode and decode than the
// JSON of unstructured objects, and typed objects are smaller in the cache.
// Readers still get unstructured objects (see Get).
type Tracker struct {
	cache      cache.Cache
	controller controller.Controller
	scheme     *runtime.Scheme

	mu      sync.Mutex
	watched map[schema.GroupVersionKind]bool
}

func newTracker(mgr ctrl.Manager) (*Tracker, error) {
	owned, err := labels.NewRequirement(rukpakv1alpha1.LabelOwnerKind, selection.Equals, []string{"BundleDeployment"})
	if err != nil {
		return nil, err
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		HTTPClient:           mgr.GetHTTPClient(),
		DefaultLabelSelector: labels.NewSelector().Add(*owned),
		// managedFields are often the larger part of an object and nothing
		// here reads them.
		DefaultTransform: cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, fmt.Errorf("creating cache of installed objects: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, err
	}
	return &Tracker{cache: c, scheme: mgr.GetScheme(), watched: map[schema.GroupVersionKind]bool{}}, nil
}

// object returns an empty object of gvk to read the cache with: typed if
// the scheme knows the kind, unstructured otherwise.
func (t *Tracker) object(gvk schema.GroupVersionKind) client.Object {
	if o, err := t.scheme.New(gvk); err == nil {
		if co, ok := o.(client.Object); ok {
			return co
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// list returns an empty list of gvk's kind, typed like object (a scheme
// registers a kind and its list together).
func (t *Tracker) list(gvk schema.GroupVersionKind) client.ObjectList {
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	if o, err := t.scheme.New(listGVK); err == nil {
		if l, ok := o.(client.ObjectList); ok {
			return l
		}
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(listGVK)
	return l
}

// Watch makes sure changes to objects of each kind in objs are seen.
func (t *Tracker) Watch(objs []*unstructured.Unstructured) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if t.watched[gvk] {
			continue
		}
		src := source.Kind[client.Object](t.cache, t.object(gvk), handler.EnqueueRequestsFromMapFunc(ownerRequest))
		if err := t.controller.Watch(src); err != nil {
			return fmt.Errorf("watching %s: %w", gvk, err)
		}
		t.watched[gvk] = true
	}
	return nil
}

// Get reads an installed object from the cache into obj, whose kind,
// namespace and name say which.
func (t *Tracker) Get(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	o := t.object(gvk)
	if _, ok := o.(*unstructured.Unstructured); ok {
		return t.cache.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	}
	if err := t.cache.Get(ctx, client.ObjectKeyFromObject(obj), o); err != nil {
		return err
	}
	return fromTyped(o, gvk, obj)
}

// fromTyped fills into with typed object o of kind gvk.
func fromTyped(o runtime.Object, gvk schema.GroupVersionKind, into *unstructured.Unstructured) error {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return fmt.Errorf("converting %s: %w", gvk.Kind, err)
	}
	into.SetUnstructuredContent(content)
	into.SetGroupVersionKind(gvk) // typed objects from a cache have no TypeMeta
	return nil
}

func ownerRequest(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[rukpakv1alpha1.LabelOwnerKind] != "BundleDeployment" || l[rukpakv1alpha1.LabelOwnerName] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: l[rukpakv1alpha1.LabelOwnerName]}}}
}

// Deleter deletes an object only if it carries a release's ownership
// metadata (release.Manager).
type Deleter interface {
	DeleteIfOwned(ctx context.Context, o *unstructured.Unstructured, release string) (kept string, err error)
}

// DeleteOwned deletes every object of a watched kind still labelled as
// installed by the BundleDeployment named owner and carrying its release's
// ownership metadata, and reports how many it deleted and which it left
// alone: the owner label alone is anyone's to set, and an object labelled
// for owner may belong to another release now. It backs up an uninstall
// that failed part-way (whose release record may already be gone) and
// clusters without a garbage collector.
func (t *Tracker) DeleteOwned(ctx context.Context, d Deleter, owner string) (int, []string, error) {
	t.mu.Lock()
	gvks := make([]schema.GroupVersionKind, 0, len(t.watched))
	for gvk := range t.watched {
		gvks = append(gvks, gvk)
	}
	t.mu.Unlock()
	deleted := 0
	var kept []string
	for _, gvk := range gvks {
		list := t.list(gvk)
		if err := t.cache.List(ctx, list, client.MatchingLabels{
			rukpakv1alpha1.LabelOwnerKind: "BundleDeployment",
			rukpakv1alpha1.LabelOwnerName: owner,
		}); err != nil {
			return deleted, kept, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return deleted, kept, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		for _, item := range items {
			m, err := meta.Accessor(item)
			if err != nil {
				return deleted, kept, err
			}
			if !m.GetDeletionTimestamp().IsZero() {
				continue
			}
			o := &unstructured.Unstructured{}
			o.SetGroupVersionKind(gvk)
			o.SetNamespace(m.GetNamespace())
			o.SetName(m.GetName())
			k, err := d.DeleteIfOwned(ctx, o, owner)
			if err != nil {
				return deleted, kept, err
			}
			if k != "" {
				kept = append(kept, k)
				continue
			}
			deleted++
		}
	}
	return deleted, kept, nil
}
