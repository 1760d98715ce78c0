package provisioner_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testfiles"
	"github.com/rukpak-dev/rukpak/internal/testgit"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/helm"
	"github.com/rukpak-dev/rukpak/storage"
)

// helmTestdata holds real charts, unmodified (see its README).
const helmTestdata = "../../shared/testdata/helm"

var helmCharts = []string{"hello-world", "kube-state-metrics", "prometheus-operator-admission-webhook", "prometheus-operator-crds"}

// chartFiles reads a chart directory of the test data: path -> content.
func chartFiles(t *testing.T, chartName, prefix string) map[string]string {
	return testfiles.Read(t, filepath.Join(helmTestdata, chartName), prefix)
}

// helmPackage is a chart as `helm package` writes it (chart repositories
// publish these): loaded by Helm and saved by Helm.
func helmPackage(t *testing.T, ch *chart.Chart) []byte {
	t.Helper()
	out, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func loadTestChart(t *testing.T, name string) *chart.Chart {
	t.Helper()
	ch, err := loader.LoadDir(filepath.Join(helmTestdata, name))
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// chartServer serves chart archives by path, like a chart repository.
type chartServer struct {
	*httptest.Server
	mu    sync.Mutex
	files map[string][]byte
}

func newChartServer(t *testing.T) *chartServer { return startChartServer(t, false) }

// newTLSChartServer is newChartServer over HTTPS, with httptest's
// certificate: an http source takes no CA, its sources skip verification.
func newTLSChartServer(t *testing.T) *chartServer { return startChartServer(t, true) }

func startChartServer(t *testing.T, tls bool) *chartServer {
	s := &chartServer{files: map[string][]byte{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		data, ok := s.files[r.URL.Path]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	}))
	if tls {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

func (s *chartServer) serve(name string, data []byte) rukpakv1alpha1.BundleSource {
	s.mu.Lock()
	s.files["/"+name] = data
	s.mu.Unlock()
	src := rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeHTTP, HTTP: &rukpakv1alpha1.HTTPSource{URL: s.URL + "/" + name}}
	if s.TLS != nil {
		src.HTTP.Auth = &rukpakv1alpha1.Authorization{InsecureSkipVerify: true}
	}
	return src
}

func (h *harness) createHelmBundle(name string, src rukpakv1alpha1.BundleSource) {
	h.t.Helper()
	b := &rukpakv1alpha1.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassHelm, Source: src},
	}
	if err := h.c.Create(context.Background(), b); err != nil {
		h.t.Fatal(err)
	}
}

// chartConfigMaps creates one ConfigMap per directory of a chart's files
// (path -> content; ConfigMap keys hold no "/"), named prefix-0, prefix-1,
// ..., and returns the configMaps source that lays them out again.
func (h *harness) chartConfigMaps(prefix string, files map[string]string) []rukpakv1alpha1.ConfigMapSource {
	h.t.Helper()
	dirs := map[string]map[string]string{}
	for name, data := range files {
		dir, base := path.Split(name)
		dir = strings.TrimSuffix(dir, "/")
		if dirs[dir] == nil {
			dirs[dir] = map[string]string{}
		}
		dirs[dir][base] = data
	}
	names := slices.Sorted(maps.Keys(dirs))
	out := make([]rukpakv1alpha1.ConfigMapSource, 0, len(names))
	for i, dir := range names {
		name := fmt.Sprintf("%s-%d", prefix, i)
		h.createConfigMap(name, dirs[dir], nil)
		out = append(out, rukpakv1alpha1.ConfigMapSource{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: name}, Path: dir})
	}
	return out
}

func (h *harness) createConfigMap(name string, data map[string]string, binary map[string][]byte) {
	h.t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Immutable:  ptr.To(true),
		Data:       data,
		BinaryData: binary,
	}
	if err := h.c.Create(context.Background(), cm); err != nil {
		h.t.Fatal(err)
	}
}

// TestIntegrationHelmSources unpacks every chart of the shared test data
// from every source type a chart comes from (git directory, chart archive
// over http, bundle image of the chart directory, Helm OCI artifact,
// ConfigMaps), and checks that the stored content loads as the same chart.
func TestIntegrationHelmSources(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()

	root := testgit.NewRoot(t)
	repo := root.NewRepo("charts")
	for _, name := range helmCharts {
		repo.WriteFiles(chartFiles(t, name, "charts/"+name))
	}
	repo.Commit("charts")
	gitSrv := root.ServeHTTP(testgit.HTTPOptions{})
	httpSrv := newChartServer(t)

	type bundleCase struct {
		bundle, chart string
		src           rukpakv1alpha1.BundleSource
	}
	var cases []bundleCase
	for _, name := range helmCharts {
		ch := loadTestChart(t, name)
		tgz := helmPackage(t, ch)
		ociRef := h.reg.PushChart(t, "oci", tgz, nil)
		h.reg.MustPush(t, h.reg.Ref("chartdirs/"+name+":v1"), testregistry.Image(t, testregistry.LayerFromDir(t, filepath.Join(helmTestdata, name), "")))
		cases = append(cases,
			bundleCase{name + "-git", name, rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit, Git: &rukpakv1alpha1.GitSource{
				Repository: gitSrv.RepoURL("charts"), Ref: rukpakv1alpha1.GitRef{Branch: "main"}, Directory: "charts/" + name,
			}}},
			bundleCase{name + "-http", name, httpSrv.serve(name+"-"+ch.Metadata.Version+".tgz", tgz)},
			bundleCase{name + "-image", name, rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{
				Ref: h.reg.Ref("chartdirs/" + name + ":v1"), CertificateData: string(h.reg.CAPEM),
			}}},
			bundleCase{name + "-oci", name, rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{
				Ref: ociRef, CertificateData: string(h.reg.CAPEM),
			}}},
		)
	}

	// A chart directory takes one ConfigMap per directory, or one archive
	// in binaryData.
	h.createConfigMap("hello-world-tgz", nil, map[string][]byte{"hello-world-0.1.0.tgz": helmPackage(t, loadTestChart(t, "hello-world"))})
	cases = append(cases,
		bundleCase{"hello-world-configmaps", "hello-world", rukpakv1alpha1.BundleSource{
			Type: rukpakv1alpha1.SourceTypeConfigMaps, ConfigMaps: h.chartConfigMaps("hello-world-dir", chartFiles(t, "hello-world", "")),
		}},
		bundleCase{"hello-world-configmap-tgz", "hello-world", rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps, ConfigMaps: []rukpakv1alpha1.ConfigMapSource{
			{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: "hello-world-tgz"}},
		}}},
	)

	for _, c := range cases {
		h.createHelmBundle(c.bundle, c.src)
	}
	store := &storage.LocalDirectory{RootDirectory: h.storeDir, BaseURL: "https://content.test"}
	for _, c := range cases {
		t.Run(c.bundle, func(t *testing.T) {
			b := h.waitBundle(c.bundle, rukpakv1alpha1.PhaseUnpacked, rukpakv1alpha1.ReasonUnpackSuccessful, "")
			fsys, err := store.Load(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			got, err := helm.LoadChart(fsys)
			if err != nil {
				t.Fatalf("stored content: %v", err)
			}
			want := loadTestChart(t, c.chart)
			if got.Name() != want.Name() || got.Metadata.Version != want.Metadata.Version {
				t.Errorf("stored chart %s %s, want %s %s", got.Name(), got.Metadata.Version, want.Name(), want.Metadata.Version)
			}
			if g, w := fileDigest(got), fileDigest(want); g != w {
				t.Errorf("stored chart's files differ from the chart's:\n%s\nwant:\n%s", g, w)
			}
		})
	}
}

// fileDigest lists a chart's files and sizes, subcharts included.
func fileDigest(ch *chart.Chart) string {
	var b strings.Builder
	var walk func(prefix string, ch *chart.Chart)
	walk = func(prefix string, ch *chart.Chart) {
		names := map[string]int{}
		for _, f := range append(append([]*chart.File{}, ch.Templates...), ch.Files...) {
			names[f.Name] = len(f.Data)
		}
		keys := make([]string, 0, len(names))
		for k := range names {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b.WriteString(prefix + k + " " + strconv.Itoa(names[k]) + "\n")
		}
		for _, d := range ch.Dependencies() {
			walk(prefix+d.Name()+"/", d)
		}
	}
	walk("", ch)
	return b.String()
}

// TestIntegrationHelmBrokenCharts: a chart Helm cannot install is not
// unpacked, and the condition carries Helm's message.
func TestIntegrationHelmBrokenCharts(t *testing.T) {
	t.Parallel()
	h := newHarness(t)

	root := testgit.NewRoot(t)
	repo := root.NewRepo("broken")
	hello := chartFiles(t, "hello-world", "v9")
	hello["v9/Chart.yaml"] = strings.Replace(hello["v9/Chart.yaml"], "apiVersion: v2", "apiVersion: v9", 1)
	repo.WriteFiles(hello)
	repo.Commit("apiVersion v9")
	gitSrv := root.ServeHTTP(testgit.HTTPOptions{})
	h.createHelmBundle("apiversion-v9", rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit, Git: &rukpakv1alpha1.GitSource{
		Repository: gitSrv.RepoURL("broken"), Ref: rukpakv1alpha1.GitRef{Branch: "main"}, Directory: "v9",
	}})

	noChartYAML := map[string]string{}
	for name, data := range chartFiles(t, "hello-world", "") {
		if !strings.Contains(name, "/") && name != "Chart.yaml" {
			noChartYAML[name] = data
		}
	}
	h.createConfigMap("no-chart-yaml", noChartYAML, nil)
	h.createHelmBundle("no-chart-yaml", rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps, ConfigMaps: []rukpakv1alpha1.ConfigMapSource{
		{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: "no-chart-yaml"}},
	}})

	// Packaged without `helm dependency build`: Chart.yaml names the crds
	// subchart, charts/ is not in the archive.
	crds := loadTestChart(t, "prometheus-operator-crds")
	crds.SetDependencies()
	httpSrv := newChartServer(t)
	h.createHelmBundle("missing-dependency", httpSrv.serve("crds.tgz", helmPackage(t, crds)))

	// A tgz that is no chart, pushed as an image layer.
	h.reg.MustPush(t, h.reg.Ref("notachart:v1"), testregistry.Image(t, testregistry.Layer(t, map[string]string{"manifests/cm.yaml": configMap("x", "1")})))
	h.createHelmBundle("plain-image", rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{
		Ref: h.reg.Ref("notachart:v1"), CertificateData: string(h.reg.CAPEM),
	}})

	for name, want := range map[string]string{
		"apiversion-v9":      `invalid chart "hello-world": apiVersion 'v9' is not valid. The value must be either "v1" or "v2"`,
		"no-chart-yaml":      "loading the chart: Chart.yaml file is missing (looked for at the content's root, in its only directory, and as its only file, a chart .tgz)",
		"missing-dependency": "invalid chart \"prometheus-operator-crds\": found in Chart.yaml, but missing in charts/ directory: crds (run `helm dependency build` and include charts/ in the bundle)",
		"plain-image":        "loading the chart: Chart.yaml file is missing (looked for at the content's root, in its only directory, and as its only file, a chart .tgz)",
	} {
		t.Run(name, func(t *testing.T) {
			b := h.waitBundle(name, rukpakv1alpha1.PhaseFailing, rukpakv1alpha1.ReasonUnpackFailed, "")
			c := conditions.Get(b.Status.Conditions, rukpakv1alpha1.TypeUnpacked)
			if c.Status != metav1.ConditionFalse || c.Message != want {
				t.Errorf("Unpacked %s: %q, want False: %q", c.Status, c.Message, want)
			}
			if b.Status.ContentURL != "" {
				t.Errorf("contentURL %q for content that was not stored", b.Status.ContentURL)
			}
		})
	}
}
