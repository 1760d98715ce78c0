package provisioner

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// newNamespaceOwners returns a cache of every Namespace's name and owner
// label (metadata-only watch, the rest trimmed): settle asks on every
// reconcile of registry+v1 content whether its install namespace exists
// and whose it is, one GET each otherwise (issue 32). One entry per
// Namespace of the cluster, ~150 bytes each whatever its labels and
// annotations hold: 1.5 MB at 10,000 Namespaces.
func newNamespaceOwners(mgr ctrl.Manager) (client.Reader, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:     mgr.GetScheme(),
		Mapper:     mgr.GetRESTMapper(),
		HTTPClient: mgr.GetHTTPClient(),
		ByObject: map[client.Object]cache.ByObject{
			namespaceMetadata(): {Transform: keepOwnerName},
		},
		// Only Namespaces: any other read is a mistake, not a new informer.
		ReaderFailOnMissingInformer: true,
	})
	if err != nil {
		return nil, fmt.Errorf("creating cache of namespaces: %w", err)
	}
	// Started with the manager, so its first read finds it synced.
	if _, err := c.GetInformer(context.Background(), namespaceMetadata()); err != nil {
		return nil, err
	}
	if err := mgr.Add(c); err != nil {
		return nil, err
	}
	return cachedOrLive{cache: c, live: mgr.GetAPIReader()}, nil
}

// cachedOrLive reads from cache, and from live while cache has not
// started (a reconcile may run a moment before it does).
type cachedOrLive struct{ cache, live client.Reader }

func (r cachedOrLive) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.cache.Get(ctx, key, obj, opts...)
	if notStarted := (*cache.ErrCacheNotStarted)(nil); errors.As(err, &notStarted) {
		return r.live.Get(ctx, key, obj, opts...)
	}
	return err
}

func (r cachedOrLive) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.cache.List(ctx, list, opts...)
}

func namespaceMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return m
}

// keepOwnerName keeps of a Namespace's metadata its name, resourceVersion
// and owner-name label. Idempotent, as a transform must be.
func keepOwnerName(in any) (any, error) {
	m, ok := in.(*metav1.PartialObjectMetadata)
	if !ok {
		return in, nil
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta}
	out.Name, out.ResourceVersion = m.Name, m.ResourceVersion
	if v, ok := m.Labels[rukpakv1alpha1.LabelOwnerName]; ok {
		out.Labels = map[string]string{rukpakv1alpha1.LabelOwnerName: v}
	}
	return out, nil
}
