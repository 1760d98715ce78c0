package storage

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
)

// NewHandler serves the archives in dir (see NewFileHandler) to clients the
// API server at cfg authenticates and authorises (see WithAuth), with
// tokens of one of audiences (DefaultContentAudience when empty).
// The provisioner needs create on tokenreviews.authentication.k8s.io and
// subjectaccessreviews.authorization.k8s.io; clients need the bundle-reader
// ClusterRole. Serve it over TLS: it reads bearer tokens.
func NewHandler(cfg *rest.Config, dir string, audiences []string, log logr.Logger) (http.Handler, error) {
	authn, authz, err := NewDelegatingAuth(cfg, audiences)
	if err != nil {
		return nil, err
	}
	return WithAuth(NewFileHandler(dir), authn, authz, log), nil
}

// NewDelegatingAuth returns an authenticator that checks bearer tokens with
// TokenReviews for audiences (DefaultContentAudience when empty) and an
// authorizer that asks SubjectAccessReviews, both against the API server at
// cfg.
//
// A token of the API server's audience is refused: the content service
// must not be a place where tokens that work against the API server are
// sent. Neither decision is cached: downloads are rare (another process's
// fallback, a user's kubectl), and a revoked binding or deleted
// ServiceAccount must stop working on the next request rather than a minute
// later.
func NewDelegatingAuth(cfg *rest.Config, audiences []string) (authenticator.Request, authorizer.Authorizer, error) {
	if len(audiences) == 0 {
		audiences = []string{DefaultContentAudience}
	}
	authnClient, err := authenticationv1.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("creating TokenReview client: %w", err)
	}
	authzClient, err := authorizationv1.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("creating SubjectAccessReview client: %w", err)
	}
	// The API server's own default for its webhooks.
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		TokenAccessReviewClient:  authnClient,
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      &backoff,
		APIAudiences:             authenticator.Audiences(audiences),
		CacheTTL:                 0, // no cache
	}.New()
	if err != nil {
		return nil, nil, fmt.Errorf("creating delegating authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authzClient,
		AllowCacheTTL:             0, // no cache
		DenyCacheTTL:              0,
		WebhookRetryBackoff:       &backoff,
	}.New()
	if err != nil {
		return nil, nil, fmt.Errorf("creating delegating authorizer: %w", err)
	}
	return withAudiences{auds: audiences, next: authn}, authz, nil
}

// withAudiences asks for tokens of auds: the token webhook sends the
// audiences found in the request's context as TokenReview spec.audiences
// (the API server's authentication filter sets them; this server has none).
type withAudiences struct {
	auds authenticator.Audiences
	next authenticator.Request
}

func (a withAudiences) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	return a.next.AuthenticateRequest(r.WithContext(authenticator.WithAudiences(r.Context(), a.auds)))
}

// WithAuth lets a request through to next only when authn
// identifies its client (401 otherwise) and authz allows that user the
// request's verb on its URL path as a non-resource URL (403 otherwise). GET
// and HEAD are the verb "get", as in the API server, so a ClusterRole rule
// {nonResourceURLs: ["/bundles/*"], verbs: ["get"]} grants downloads.
func WithAuth(next http.Handler, authn authenticator.Request, authz authorizer.Authorizer, log logr.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, ok, err := authn.AuthenticateRequest(r)
		if err != nil || !ok {
			// As in the API server, every authentication failure is a 401;
			// the reason is logged, not told to the client.
			if err != nil {
				log.V(1).Info("Authentication failed", "path", r.URL.Path, "reason", err.Error())
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="rukpak"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		// The authenticator has consumed the token: do not pass it on.
		r.Header.Del("Authorization")

		attrs := authorizer.AttributesRecord{
			User: resp.User,
			Verb: verb(r.Method),
			Path: r.URL.Path,
		}
		decision, reason, err := authz.Authorize(r.Context(), attrs)
		if err != nil {
			log.Error(err, "Authorization failed", "user", resp.User.GetName(), "path", r.URL.Path)
			http.Error(w, "authorization check failed", http.StatusInternalServerError)
			return
		}
		if decision != authorizer.DecisionAllow {
			log.V(1).Info("Forbidden", "user", resp.User.GetName(), "verb", attrs.Verb, "path", r.URL.Path, "reason", reason)
			http.Error(w, fmt.Sprintf("user %q cannot %s path %q", resp.User.GetName(), attrs.Verb, r.URL.Path), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func verb(method string) string {
	if method == http.MethodHead {
		return "get"
	}
	return strings.ToLower(method)
}
