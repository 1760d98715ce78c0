package certs

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// DefaultSecretName is the Secret holding the self-managed CA and serving
// certificate.
const DefaultSecretName = "rukpak-webhook-certs"

// Options configure self-managed certificates.
type Options struct {
	// Namespace of the Secret (the webhook's namespace).
	Namespace string
	// SecretName defaults to DefaultSecretName.
	SecretName string
	// DNSName the serving certificate is valid for, e.g.
	// rukpak-webhook-service.rukpak-system.svc.
	DNSName string
	// ExtraDNSNames are added to the serving certificate.
	ExtraDNSNames []string
	// WebhookConfigurations are the ValidatingWebhookConfigurations whose
	// caBundle is kept in sync with the CA.
	WebhookConfigurations []string
	// CertDir receives tls.crt, tls.key and ca.crt.
	CertDir string
	// RequireLeaderElection makes only the leader rotate; every replica
	// still writes the Secret's certificates to its CertDir.
	RequireLeaderElection bool

	// ControllerName names the rotation controller; controller names are
	// process-wide unique. Defaults to rukpak-webhook-cert-rotator.
	ControllerName string
	// CAName is the CA's common name; defaults to rukpak-webhook-ca.
	CAName string

	// CAValidity, ServerValidity, RenewBefore and CheckInterval tune
	// rotation; zero values take cert-controller's defaults (10 years, 1
	// year, 90 days, 12 hours). Tests shorten them.
	CAValidity     time.Duration
	ServerValidity time.Duration
	RenewBefore    time.Duration
	CheckInterval  time.Duration
}

// AddSelfManaged adds certificate rotation and the Secret-to-directory
// writer to mgr. The returned channel is closed once this replica's CertDir
// holds a valid key pair and (without leader election) the CA is injected
// into the webhook configurations; gate the webhook server and readiness on
// it.
func AddSelfManaged(ctx context.Context, mgr manager.Manager, o Options) (<-chan struct{}, error) {
	if o.Namespace == "" || o.DNSName == "" || o.CertDir == "" {
		return nil, fmt.Errorf("self-managed certificates need a namespace, a DNS name and a certificate directory")
	}
	if o.SecretName == "" {
		o.SecretName = DefaultSecretName
	}
	if o.ControllerName == "" {
		o.ControllerName = "rukpak-webhook-cert-rotator"
	}
	if o.CAName == "" {
		o.CAName = "rukpak-webhook-ca"
	}
	key := types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName}
	// cert-controller updates the Secret but fails at start if it is
	// missing, so create an empty one: nothing has to be installed first.
	if err := ensureSecret(ctx, mgr, key); err != nil {
		return nil, err
	}

	webhooks := make([]rotator.WebhookInfo, 0, len(o.WebhookConfigurations))
	for _, name := range o.WebhookConfigurations {
		webhooks = append(webhooks, rotator.WebhookInfo{Name: name, Type: rotator.Validating})
	}
	injected := make(chan struct{})
	if err := rotator.AddRotator(oneSecret{Manager: mgr, cfg: narrowSecrets(mgr.GetConfig(), key)}, &rotator.CertRotator{
		SecretKey:              key,
		CertDir:                o.CertDir,
		CAName:                 o.CAName,
		CAOrganization:         "rukpak",
		DNSName:                o.DNSName,
		ExtraDNSNames:          o.ExtraDNSNames,
		IsReady:                injected,
		Webhooks:               webhooks,
		FieldOwner:             "rukpak-webhook",
		RequireLeaderElection:  o.RequireLeaderElection,
		CaCertDuration:         o.CAValidity,
		ServerCertDuration:     o.ServerValidity,
		LookaheadInterval:      o.RenewBefore,
		RotationCheckFrequency: o.CheckInterval,
		ControllerName:         o.ControllerName,
	}); err != nil {
		return nil, fmt.Errorf("adding certificate rotator: %w", err)
	}

	w := &SecretWriter{Secret: key, Dir: o.CertDir}
	if err := w.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	return allReady(ctx, w.Ready(), injected, !o.RequireLeaderElection), nil
}

// allReady closes once files is closed and, when waitInjected, injected is
// too. The rotator reports injection only on the replica that rotates, so
// with leader election a replica is ready once it can serve: the leader
// keeps the caBundle current.
func allReady(ctx context.Context, files, injected <-chan struct{}, waitInjected bool) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		select {
		case <-files:
		case <-ctx.Done():
			return
		}
		if waitInjected {
			select {
			case <-injected:
			case <-ctx.Done():
				return
			}
		}
		close(out)
	}()
	return out
}

func ensureSecret(ctx context.Context, mgr manager.Manager, key types.NamespacedName) error {
	var s corev1.Secret
	err := mgr.GetAPIReader().Get(ctx, key, &s)
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("getting Secret %s: %w", key, err)
	}
	s = corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
	}
	if err := mgr.GetClient().Create(ctx, &s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Secret %s: %w", key, err)
	}
	return nil
}

// oneSecret is mgr as cert-controller's rotator sees it. The rotator
// builds a cache of its namespace's Secrets from GetConfig and offers no
// way to narrow it: without this it would list, watch and hold every
// Secret of the namespace (Helm release records, credentials), and need
// the right to.
type oneSecret struct {
	manager.Manager
	cfg *rest.Config
}

func (m oneSecret) GetConfig() *rest.Config { return m.cfg }

// narrowSecrets returns cfg whose lists and watches of the Secrets of
// key's namespace select key's Secret alone (field selector
// metadata.name), which the API server authorizes by name: a Role granting
// list and watch with resourceNames allows them.
func narrowSecrets(cfg *rest.Config, key types.NamespacedName) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return secretSelector{next: rt, collection: "/api/v1/namespaces/" + key.Namespace + "/secrets", name: key.Name}
	})
	return c
}

type secretSelector struct {
	next       http.RoundTripper
	collection string
	name       string
}

func (s secretSelector) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, s.collection) {
		req = req.Clone(req.Context())
		q := req.URL.Query()
		q.Set("fieldSelector", fields.OneTermEqualSelector("metadata.name", s.name).String())
		req.URL.RawQuery = q.Encode()
	}
	return s.next.RoundTrip(req)
}
