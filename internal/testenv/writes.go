package testenv

import (
	"net/http"
	"sync"

	"k8s.io/client-go/rest"
)

// Requests records the requests other than reads (GET, HEAD, OPTIONS) sent
// through a config it wrapped, so a test can assert that something wrote
// nothing, dry runs included.
type Requests struct {
	mu   sync.Mutex
	sent []string
}

// RecordWrites returns a copy of cfg whose clients record their non-read
// requests in the returned Requests.
func RecordWrites(cfg *rest.Config) (*rest.Config, *Requests) {
	r := &Requests{}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			switch req.Method {
			case http.MethodGet, http.MethodHead, http.MethodOptions:
			default:
				r.mu.Lock()
				r.sent = append(r.sent, req.Method+" "+req.URL.RequestURI())
				r.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg, r
}

// Take returns the requests recorded since the last Take and forgets them.
func (r *Requests) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	sent := r.sent
	r.sent = nil
	return sent
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
