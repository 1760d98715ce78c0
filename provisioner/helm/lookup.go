package helm

import (
	"fmt"
	"net/http"
	"strings"
)

// LookupGuard is what a chart's `lookup` may read: the cluster as the
// install's identity may, but only with GETs, never the provisioner's
// namespace (Forbidden: its credentials and the release records), and not
// Secrets or ConfigMaps listed across namespaces (which would include it).
type LookupGuard struct {
	Forbidden string
}

// Allowed says why a request of method to the API path p is refused, if
// it is.
func (g LookupGuard) Allowed(method, p string) error {
	if method != http.MethodGet {
		return fmt.Errorf("a chart's lookup may only read (%s %s)", method, p)
	}
	segs := strings.Split(strings.Trim(p, "/"), "/")
	for i, s := range segs {
		if s == "namespaces" && i+1 < len(segs) && segs[i+1] == g.Forbidden {
			return fmt.Errorf("a chart's lookup may not read the provisioner's namespace %q", g.Forbidden)
		}
	}
	// /api/v1/secrets and /api/v1/configmaps; other groups hold neither.
	if len(segs) == 3 && segs[0] == "api" && (segs[2] == "secrets" || segs[2] == "configmaps") {
		return fmt.Errorf("a chart's lookup may not list %s across namespaces (the provisioner's namespace holds its credentials)", segs[2])
	}
	return nil
}

// Wrap guards rt (a rest.Config's WrapTransport).
func (g LookupGuard) Wrap(rt http.RoundTripper) http.RoundTripper {
	return guardedTransport{next: rt, guard: g}
}

type guardedTransport struct {
	next  http.RoundTripper
	guard LookupGuard
}

func (t guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.guard.Allowed(req.Method, req.URL.Path); err != nil {
		return nil, err
	}
	return t.next.RoundTrip(req)
}
