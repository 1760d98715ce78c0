package release

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/kube"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
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

// RecoverHistory returns every record of release name (oldest first is not
// promised), marking failed first the records a crash left pending. The
// caller must hold the release's Lock: a pending record is a crash's
// leftover only if no action of this Manager runs on the release. A missing
// release has no records.
func (m *Manager) RecoverHistory(ctx context.Context, name string) ([]*helmrelease.Release, error) {
	h, err := m.history(ctx, name)
	return h.all, err
}

// History returns every record of release name as stored, changing
// nothing: what readers that are not the release's writer use (a pending
// record may be an action running now, in this or another process).
func (m *Manager) History(name string) ([]*helmrelease.Release, error) {
	all, err := m.store.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading release %q: %w", name, err)
	}
	return all, nil
}

// DecodeManifest splits a release manifest into its objects.
func DecodeManifest(manifest string) ([]*unstructured.Unstructured, error) {
	return decodeManifest(manifest)
}
