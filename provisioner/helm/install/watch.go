package install

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// SetupWatches makes a change to a values source (a ConfigMap or Secret of
// the provisioner's namespace labelled LabelValuesSource) reconcile the
// BundleDeployments that read it. Only the sources' metadata is cached, in
// a cache of their own: the namespace's other Secrets (release records of
// up to 16 MiB, credentials) are never listed or held.
func (in *Installer) SetupWatches(mgr ctrl.Manager, c controller.Controller) error {
	// A job's end reconciles its BundleDeployment (jobs.go).
	js := in.jobs()
	js.mu.Lock()
	js.notify = make(chan event.GenericEvent, 1024)
	js.mu.Unlock()
	if err := c.Watch(source.Channel(js.notify, &handler.EnqueueRequestForObject{})); err != nil {
		return fmt.Errorf("watching the ends of background jobs: %w", err)
	}
	// Renders stop with the manager (actions run to their end).
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		js.cancelRenders()
		return nil
	})); err != nil {
		return err
	}
	ca, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		HTTPClient:           mgr.GetHTTPClient(),
		DefaultNamespaces:    map[string]cache.Config{in.Releases.Namespace(): {}},
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{LabelValuesSource: "true"}),
	})
	if err != nil {
		return fmt.Errorf("creating cache of values sources: %w", err)
	}
	if err := mgr.Add(ca); err != nil {
		return err
	}
	for _, kind := range []string{"ConfigMap", "Secret"} {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
		src := source.Kind[client.Object](ca, obj, handler.EnqueueRequestsFromMapFunc(in.readers(kind)))
		if err := c.Watch(src); err != nil {
			return fmt.Errorf("watching values sources (%s): %w", kind, err)
		}
	}
	return nil
}

// readers maps a values source of kind to the BundleDeployments of the
// class that read it.
func (in *Installer) readers(kind string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var bds rukpakv1alpha1.BundleDeploymentList
		// Read only, on every change of a values source: no copy of every
		// BundleDeployment.
		if err := in.Client.List(ctx, &bds, client.UnsafeDisableDeepCopy); err != nil {
			log.FromContext(ctx).Error(err, "listing bundle deployments reading a values source", "kind", kind, "name", o.GetName())
			return nil
		}
		var reqs []reconcile.Request
		for i := range bds.Items {
			bd := &bds.Items[i]
			if bd.Spec.ProvisionerClassName != in.Class {
				continue
			}
			cfg, err := ParseConfig(bd, in.Releases.Namespace())
			if err != nil || !cfg.references(kind, o.GetName()) {
				continue
			}
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: bd.Name}})
		}
		return reqs
	}
}
