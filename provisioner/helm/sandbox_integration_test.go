package helm_test

import (
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/provisioner/helm"
)

// TestSandboxAgainstCluster: Capabilities are discovery's plus what crds/
// will add, and a render in the child looks the cluster up as the REST
// config given may.
func TestSandboxAgainstCluster(t *testing.T) {
	env := testenv.Start(t)
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
