package release

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// A release's CRDs are waited for until their kinds are mapped only where
// the release holds objects of those kinds: the client's mapper rebuilds
// itself whole for each new group, which a fleet of operators (CRDs and no
// custom resources) would pay once per CRD for nothing.
func TestIntegrationCRDKindsMappedOnlyWhereUsed(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	ctx := context.Background()
	ns, apps := testenv.Namespace(t, env, "rukpak-system"), testenv.Namespace(t, env, "apps")
	var mu sync.Mutex
	var paths []string
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			paths = append(paths, req.Method+" "+req.URL.Path)
			mu.Unlock()
			return rt.RoundTrip(req)
		})
	})
	m, err := NewManager(cfg, ns)
	if err != nil {
		t.Fatal(err)
	}
	const group = "mapped.example.com"
	crd := func(kind string) *unstructured.Unstructured {
		lower := strings.ToLower(kind)
		return parseObject(t, `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: `+lower+`s.`+group+`}
spec:
  group: `+group+`
  names: {kind: `+kind+`, listKind: `+kind+`List, plural: `+lower+`s, singular: `+lower+`}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`)
	}
	t.Cleanup(func() {
		if _, err := m.Uninstall(ctx, "mapped"); err != nil {
			t.Errorf("uninstalling: %v", err)
		}
	})
	discovered := func() (n int) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range paths {
			if strings.HasPrefix(p, "GET /apis/"+group+"/") || p == "GET /apis/"+group {
				n++
			}
		}
		paths = nil
		return n
	}

	// CRDs alone: nothing asks for their kinds.
	if _, err := m.Apply(ctx, "mapped", []*unstructured.Unstructured{crd("Unused"), crd("Used")}, nil); err != nil {
		t.Fatalf("install: %v", err)
	}
	if n := discovered(); n != 0 {
		t.Errorf("%d discovery requests for %s by an install of CRDs alone, want none", n, group)
	}

	// One custom resource of one of them: its kind is mapped before it
	// is applied (it would fail with no matches for the kind otherwise).
	cr := parseObject(t, `
apiVersion: `+group+`/v1
kind: Used
metadata: {name: one}
spec: {size: 1}
`)
	cr.SetNamespace(apps)
	if _, err := m.Apply(ctx, "mapped", []*unstructured.Unstructured{crd("Unused"), crd("Used"), cr}, nil); err != nil {
		t.Fatalf("upgrade with a custom resource: %v", err)
	}
	if n := discovered(); n == 0 {
		t.Errorf("no discovery request for %s by an install of one of its kinds", group)
	}
}
