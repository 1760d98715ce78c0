package identity

import (
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/internal/leanclient"
	"github.com/rukpak-dev/rukpak/internal/leanmeta"
)

// DefaultCachedClients bounds the impersonating clients kept: each is a
// few small structs over the shared TLS transport, so an evicted one costs
// only its rebuild.
const DefaultCachedClients = 256

// Clients builds and keeps clients that impersonate ServiceAccounts.
type Clients struct {
	base   *rest.Config
	mapper meta.RESTMapper
	scheme *runtime.Scheme
	cache  *lru.Cache
}

// NewClients returns clients made from cfg (the provisioner's own) that
// impersonate a ServiceAccount each, sharing mapper (discovery is not a
// privilege, and one mapper means one discovery cache); at most size are
// kept (0: DefaultCachedClients).
func NewClients(cfg *rest.Config, mapper meta.RESTMapper, size int) (*Clients, error) {
	if size <= 0 {
		size = DefaultCachedClients
	}
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := authorizationv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	base := rest.CopyConfig(cfg)
	// As release.Manager: one request per object, no client-side throttling.
	base.QPS, base.Burst = -1, -1
	return &Clients{base: base, mapper: mapper, scheme: scheme, cache: lru.New(size)}, nil
}

// For returns a client acting as sa.
func (c *Clients) For(sa ServiceAccount) (client.Client, error) {
	if cl, ok := c.cache.Get(sa); ok {
		return cl.(client.Client), nil
	}
	cfg := rest.CopyConfig(c.base)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: sa.Username()}
	// The TLS transport underneath is client-go's cached one for this
	// config's TLS settings: shared by every identity, no connections
	// leak per client.
	hc, err := rest.HTTPClientFor(leanmeta.Config(cfg))
	if err != nil {
		return nil, fmt.Errorf("creating client for service account %s: %w", sa, err)
	}
	cc, err := client.New(cfg, client.Options{Scheme: c.scheme, Mapper: c.mapper, HTTPClient: hc})
	if err != nil {
		return nil, fmt.Errorf("creating client for service account %s: %w", sa, err)
	}
	// Installs as sa read ownership and apply through it (release.Manager.As).
	cl, err := leanclient.New(cc, cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("creating client for service account %s: %w", sa, err)
	}
	c.cache.Add(sa, cl)
	return cl, nil
}

// Len is the number of clients kept.
func (c *Clients) Len() int { return c.cache.Len() }
