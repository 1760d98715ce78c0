package liststream

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// Object escapes a name's or namespace's '?' and '#' (valid in RBAC
// names, and let through by leanclient.CheckName) as one path segment:
// the health and drift read goes to the object named, never another.
func TestObjectNameStaysInThePath(t *testing.T) {
	var path, query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, query = r.URL.Path, r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}
	for _, tc := range []struct{ namespace, name string }{{"ns", "a?b"}, {"ns", "a#b"}, {"ns#x", "a"}} {
		if _, err := c.Object(context.Background(), gvr, tc.namespace, tc.name, 1<<20); err != nil {
			t.Fatal(err)
		}
		if want := "/apis/rbac.authorization.k8s.io/v1/namespaces/" + tc.namespace + "/roles/" + tc.name; path != want || query != "" {
			t.Errorf("the server saw %q ?%q, want %q", path, query, want)
		}
	}
}
