package helm_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/provisioner/helm"
)

// TestSandboxAgainstCluster: Capabilities are discovery's plus what crds/
// will add, and a render in the child looks the cluster up as the REST
// config given may.
func TestSandboxAgainstCluster(t *testing.T) {
	env := testenv.Pooled(t)
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	testenv.MustNotError(t, err, "creating a discovery client")
	cached := memory.NewMemCacheClient(dc)
	server, err := dc.ServerVersion()
	testenv.MustNotError(t, err, "getting the server version")

	hooks, err := loader.LoadDir(filepath.Join(testenv.RepoRoot(), "test", "testdata", "charts", "hooks"))
	testenv.MustNotError(t, err, "loading the hooks chart")
	caps, err := helm.Capabilities(cached, hooks.CRDObjects())
	testenv.MustNotError(t, err, "getting capabilities")
	if caps.KubeVersion.Version != server.GitVersion {
		t.Errorf("kube version %s, want the server's %s", caps.KubeVersion.Version, server.GitVersion)
	}
	for _, want := range []string{"v1", "apps/v1/Deployment", "core.rukpak.io/v1alpha1/BundleDeployment", "hooks.test.rukpak.io/v1", "hooks.test.rukpak.io/v1/Gadget"} {
		if !caps.APIVersions.Has(want) {
			t.Errorf("capabilities lack %s", want)
		}
	}
	withoutCRDs, err := helm.Capabilities(cached, nil)
	testenv.MustNotError(t, err, "getting capabilities")
	if withoutCRDs.APIVersions.Has("hooks.test.rukpak.io/v1") || len(caps.APIVersions)-len(withoutCRDs.APIVersions) != 2 {
		t.Errorf("crds/ added %d API versions, want 2", len(caps.APIVersions)-len(withoutCRDs.APIVersions))
	}

	ch, err := helm.LoadChart(fstest.MapFS{
		"Chart.yaml":        {Data: []byte("apiVersion: v2\nname: looker\nversion: 1.0.0\n")},
		"templates/cm.yaml": {Data: []byte("kind: ConfigMap\ndata:\n  uid: {{ (lookup \"v1\" \"Namespace\" \"\" \"default\").metadata.uid | quote }}\n  gadgets: {{ .Capabilities.APIVersions.Has \"hooks.test.rukpak.io/v1/Gadget\" | quote }}\n")},
	})
	testenv.MustNotError(t, err, "loading the chart")
	var ns corev1.Namespace
	testenv.MustNotError(t, env.Client.Get(t.Context(), client.ObjectKey{Name: "default"}, &ns), "reading namespace default")
	frozen, err := helm.Freeze(t.Context(), ch, map[string]any{}, helm.FreezeInput{
		Release:      chartutil.ReleaseOptions{Name: "rel", Namespace: "default", Revision: 1, IsInstall: true},
		Capabilities: caps,
		RESTConfig:   env.Config,
	}, helm.SandboxLimits{})
	testenv.MustNotError(t, err, "freezing the chart")
	// The guard of a chart's lookups holds in the child.
	_, err = helm.Freeze(t.Context(), guarded(t), map[string]any{}, helm.FreezeInput{
		Release:    chartutil.ReleaseOptions{Name: "rel", Namespace: "default", Revision: 1, IsInstall: true},
		RESTConfig: env.Config,
		Lookup:     &helm.LookupGuard{Forbidden: "kube-system"},
	}, helm.SandboxLimits{})
	host := strings.TrimSuffix(env.Config.Host, "/")
	if !strings.HasPrefix(host, "https://") {
		host = "https://" + host
	}
	want := `template: guarded/templates/cm.yaml:1:3: executing "guarded/templates/cm.yaml" at <lookup "v1" "Secret" "kube-system" "x">: error calling lookup: Get "` +
		host + `/api/v1/namespaces/kube-system/secrets/x": a chart's lookup may not read the provisioner's namespace "kube-system"`
	if err == nil || err.Error() != want {
		t.Errorf("lookup in the forbidden namespace: %v\nwant: %s", err, want)
	}

	want = "{{`kind: ConfigMap\ndata:\n  uid: \"" + string(ns.UID) + "\"\n  gadgets: \"true\"\n`}}"
	if got := string(frozen.Templates[0].Data); got != want {
		t.Errorf("frozen template:\n%s\nwant:\n%s", got, want)
	}
}

// guarded is a chart looking up a Secret in kube-system.
func guarded(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := helm.LoadChart(fstest.MapFS{
		"Chart.yaml":        {Data: []byte("apiVersion: v2\nname: guarded\nversion: 1.0.0\n")},
		"templates/cm.yaml": {Data: []byte(`{{ lookup "v1" "Secret" "kube-system" "x" }}`)},
	})
	testenv.MustNotError(t, err, "loading the chart")
	return ch
}

// getter hands Helm's action configuration a REST config and real
// discovery, as the provisioner's release manager does.
type getter struct {
	cfg *rest.Config
	dc  discovery.CachedDiscoveryInterface
}

func (g getter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }
func (g getter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.dc, nil
}
func (g getter) ToRESTMapper() (meta.RESTMapper, error) {
	return restmapper.NewDeferredDiscoveryRESTMapper(g.dc), nil
}
func (g getter) ToRawKubeConfigLoader() clientcmd.ClientConfig { return nil }

// TestFreezeForAction: an install renders revision 1 in the install
// namespace with what crds/ adds; an upgrade renders the last revision + 1
// in the deployed release's namespace without; lookups read as the user
// given; the action configuration gets the capabilities rendered with.
func TestFreezeForAction(t *testing.T) {
	env := testenv.Pooled(t)
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	testenv.MustNotError(t, err, "creating a discovery client")
	crd, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "test", "testdata", "charts", "hooks", "crds", "gadgets.yaml"))
	testenv.MustNotError(t, err, "reading the hooks chart's CRD")
	ch, err := helm.LoadChart(fstest.MapFS{
		"Chart.yaml":        {Data: []byte("apiVersion: v2\nname: action\nversion: 1.0.0\n")},
		"crds/gadgets.yaml": {Data: crd},
		"templates/cm.yaml": {Data: []byte(`{{ .Release.Revision }} {{ .Release.IsUpgrade }} {{ .Release.Namespace }} {{ .Capabilities.APIVersions.Has "hooks.test.rukpak.io/v1/Gadget" }}{{ if .Values.peek }} {{ (lookup "v1" "Namespace" "" "default").metadata.name }}{{ end }}`)},
	})
	testenv.MustNotError(t, err, "loading the chart")

	for _, tc := range []struct {
		name    string
		in      helm.ActionInput
		vals    map[string]any
		want    string
		wantErr string
	}{{
		name: "install",
		in:   helm.ActionInput{Release: "rel", Namespace: "apps"},
		want: "1 false apps true",
	}, {
		name: "upgrade",
		in: helm.ActionInput{Release: "rel", Namespace: "apps",
			Last: &release.Release{Version: 3, Namespace: "apps"}, Deployed: &release.Release{Version: 2, Namespace: "old"}},
		want: "4 true old false",
	}, {
		name: "lookup as the provisioner",
		in:   helm.ActionInput{Release: "rel", Namespace: "apps", Lookup: &helm.LookupGuard{Forbidden: "rukpak-system"}},
		vals: map[string]any{"peek": true},
		want: "1 false apps true default",
	}, {
		name: "lookup as a user",
		in:   helm.ActionInput{Release: "rel", Namespace: "apps", User: "system:serviceaccount:apps:nobody"},
		vals: map[string]any{"peek": true},
		wantErr: `template: action/templates/cm.yaml:1:168: executing "action/templates/cm.yaml" at <lookup "v1" "Namespace" "" "default">: error calling lookup: ` +
			`namespaces "default" is forbidden: User "system:serviceaccount:apps:nobody" cannot get resource "namespaces" in API group "" in the namespace "default"`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &action.Configuration{RESTClientGetter: getter{cfg: env.Config, dc: memory.NewMemCacheClient(dc)}}
			vals := tc.vals
			if vals == nil {
				vals = map[string]any{}
			}
			frozen, err := helm.FreezeForAction(t.Context(), cfg, ch, vals, tc.in, helm.SandboxLimits{})
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error:\n%v\nwant:\n%s", err, tc.wantErr)
				}
				return
			}
			testenv.MustNotError(t, err, "freezing the chart")
			if got, want := string(frozen.Templates[0].Data), "{{`"+tc.want+"`}}"; got != want {
				t.Errorf("rendered %s, want %s", got, want)
			}
			if cfg.Capabilities == nil || cfg.Capabilities.APIVersions.Has("hooks.test.rukpak.io/v1") != (tc.in.Deployed == nil) {
				t.Errorf("the action's capabilities are not what the chart rendered with")
			}
		})
	}
}
