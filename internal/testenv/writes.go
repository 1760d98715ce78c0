package testenv

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// Requests records the requests other than reads (GET, HEAD, OPTIONS) sent
// through a config it wrapped, so a test can assert that something wrote
// nothing, dry runs included. A create (POST) is recorded with the name
// its body gives the new object, which its URL does not hold.
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
				sent := req.Method + " " + req.URL.RequestURI()
				if name := createdName(req); name != "" {
					sent += " " + name
				}
				r.mu.Lock()
				r.sent = append(r.sent, sent)
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

// createdName is the metadata.name (or generateName) of the object a
// create request sends (JSON, or the protobuf clientsets send for built-in
// kinds), "" for anything else.
func createdName(req *http.Request) string {
	if req.Method != http.MethodPost || req.GetBody == nil {
		return ""
	}
	body, err := req.GetBody()
	if err != nil {
		return ""
	}
	defer func() { _ = body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(body, 1<<20))
	if err != nil {
		return ""
	}
	if obj, _, err := decoder.Decode(raw, nil, nil); err == nil {
		if m, err := meta.Accessor(obj); err == nil {
			return nameOf(m.GetName(), m.GetGenerateName())
		}
	}
	// A kind the scheme does not know.
	var obj struct {
		Metadata struct {
			Name         string `json:"name"`
			GenerateName string `json:"generateName"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return ""
	}
	return nameOf(obj.Metadata.Name, obj.Metadata.GenerateName)
}

var decoder = serializer.NewCodecFactory(Scheme()).UniversalDeserializer()

func nameOf(name, generateName string) string {
	if name != "" {
		return name
	}
	return generateName
}
