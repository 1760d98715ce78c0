package release

import (
	"context"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/kube"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// What Helm's action library needs to act on releases whose records m
// keeps: the helm class installs charts with action.Install, Upgrade and
// Uninstall (hooks and all), while the records stay in m's storage (split
// across Secrets when one cannot hold a record) and actions on one release
// stay serialised with m's own.

// ActionConfig returns an action configuration whose records are m's and
// whose objects go through kc (built with NewKubeClient). Each call has its
// own storage.Storage: action.Upgrade sets MaxHistory on the one it is
// given.
func (m *Manager) ActionConfig(ctx context.Context, kc kube.Interface) *action.Configuration {
	logger := log.FromContext(ctx).WithName("helm")
	return &action.Configuration{
		RESTClientGetter: m.getter,
		Releases:         storage.Init(m.store.Driver),
		KubeClient:       kc,
		Log:              func(format string, v ...any) { logger.V(1).Info(format, "args", v) },
	}
}

// NewKubeClient returns Helm's client of the cluster m talks to, placing
// objects without a namespace into namespace.
func (m *Manager) NewKubeClient(namespace string) *kube.Client {
	kc := kube.New(m.getter)
	kc.Namespace = namespace
	return kc
}

// NewKubeClientAs is NewKubeClient acting as user (impersonated; "" is
// m's own identity): the objects and hooks of an action are created,
// watched and deleted with user's rights, while discovery and the REST
// mapper stay m's (discovery is not a privilege).
func (m *Manager) NewKubeClientAs(namespace, user string) *kube.Client {
	if user == "" {
		return m.NewKubeClient(namespace)
	}
	kc := kube.New(&impersonatingGetter{restGetter: m.getter, user: user})
	kc.Namespace = namespace
	return kc
}

// impersonatingGetter is m's getter whose REST config impersonates user.
type impersonatingGetter struct {
	*restGetter
	user string
}

func (g *impersonatingGetter) ToRESTConfig() (*rest.Config, error) {
	cfg, err := g.restGetter.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg.Impersonate = rest.ImpersonationConfig{UserName: g.user}
	return cfg, nil
}

// Lock serialises actions on release name with m's own; call the returned
// function to unlock.
func (m *Manager) Lock(name string) (unlock func()) { return m.lock(name) }

// History returns every record of release name, oldest first is not
// promised; records a crash left pending are marked failed first (the
// caller holds the release's Lock). A missing release has no records.
func (m *Manager) History(ctx context.Context, name string) ([]*helmrelease.Release, error) {
	h, err := m.history(ctx, name)
	return h.all, err
}

// DecodeManifest splits a release manifest into its objects.
func DecodeManifest(manifest string) ([]*unstructured.Unstructured, error) {
	return decodeManifest(manifest)
}
