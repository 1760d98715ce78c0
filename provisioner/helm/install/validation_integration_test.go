package install

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"

	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/provisioner/helm"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// pathRecorder records the paths of the requests sent through it.
type pathRecorder struct {
	mu    sync.Mutex
	paths []string
	next  http.RoundTripper
}

func (p *pathRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	p.mu.Lock()
	p.paths = append(p.paths, req.URL.Path)
	p.mu.Unlock()
	return p.next.RoundTrip(req)
}

func (p *pathRecorder) openAPI() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, s := range p.paths {
		if strings.HasPrefix(s, "/openapi") {
			out = append(out, s)
		}
	}
	p.paths = nil
	return out
}

// TestBuildSkipsValidationTheServerDoes: against an API server that
// validates fields itself, the objects Helm builds with validation are
// built without asking for the server's OpenAPI documents, and Helm's
// validation (asked for) would not have refused what the server decides
// on either: an unknown field builds with it too.
func TestBuildSkipsValidationTheServerDoes(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	rec := &pathRecorder{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
	m, err := release.NewManager(cfg, "rukpak-system")
	testenv.MustNotError(t, err, "creating the release manager")
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	testenv.MustNotError(t, err, "creating a discovery client")
	caps, err := helm.Capabilities(memory.NewMemCacheClient(dc), nil)
	testenv.MustNotError(t, err, "reading the capabilities")
	if !validatesFields(caps) {
		t.Fatalf("the test API server (%s) does not validate fields itself", caps.KubeVersion.Version)
	}
	for _, v := range []string{"v1.26.9", "garbage", ""} {
		if validatesFields(&chartutil.Capabilities{KubeVersion: chartutil.KubeVersion{Version: v}}) {
			t.Errorf("an API server of version %q validates fields itself, says validatesFields", v)
		}
	}
	if validatesFields(nil) {
		t.Error("validatesFields(nil) = true")
	}

	manifest := `apiVersion: v1
kind: ConfigMap
metadata:
  name: built
  namespace: default
notAField: 1
data:
  a: b
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: built
  namespace: default
spec:
  selector:
    matchLabels: {app: built}
  template:
    metadata:
      labels: {app: built}
    spec:
      containers:
      - name: c
        image: busybox
`
	for _, serverValidates := range []bool{false, true} {
		kc := &guardedKube{Client: m.NewKubeClient("default"), forbidden: "rukpak-system", serverValidates: serverValidates}
		rec.openAPI()
		list, err := kc.Build(strings.NewReader(manifest), true)
		if err != nil {
			t.Fatalf("serverValidates=%v: building with validation: %v", serverValidates, err)
		}
		if len(list) != 2 {
			t.Errorf("serverValidates=%v: built %d objects, want 2", serverValidates, len(list))
		}
		got := rec.openAPI()
		switch {
		case serverValidates && len(got) > 0:
			t.Errorf("built with the server's validation, yet read its OpenAPI documents: %v", got)
		case !serverValidates && len(got) == 0:
			t.Error("Helm's validation read no OpenAPI document: nothing left to skip")
		}
		t.Logf("serverValidates=%v: OpenAPI requests %v", serverValidates, got)
	}
}
