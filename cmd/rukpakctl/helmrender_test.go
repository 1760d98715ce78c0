package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/provisioner/helm"
)

// helmPackage writes the chart directory dir as `helm package` does and
// returns the archive's path.
func helmPackage(t *testing.T, dir string) string {
	t.Helper()
	ch, err := loader.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRenderChartSources: a chart renders the same from its directory, its
// archive, a bundle image of the directory and a Helm OCI artifact, and
// that is what helm.Render gives for the same values.
func TestRenderChartSources(t *testing.T) {
	dir := shared(t, "helm/prometheus-operator-admission-webhook")
	reg := testregistry.New(t)
	ca := writeFile(t, "ca.pem", string(reg.CAPEM))
	imageRef := reg.MustPush(t, reg.Ref("chartdir:v1"), testregistry.Image(t, testregistry.LayerFromDir(t, dir, "")))
	tgz := helmPackage(t, dir)
	data, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	ociRef := reg.PushChart(t, "charts", data, nil)

	ch, err := loader.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := helm.Render(context.Background(), ch, map[string]any{"replicas": 2}, helm.RenderOptions{ReleaseName: "hooks", Namespace: "monitoring"})
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	if err := r.Write(&want); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(want.String(), "# hook: pre-install, weight 0, delete policy before-hook-creation,hook-succeeded\n") {
		t.Fatalf("no marked hook in:\n%s", want.String())
	}
	for name, args := range map[string][]string{
		"directory":    {dir},
		"archive":      {tgz},
		"image":        {imageRef, "--ca-file", ca},
		"OCI artifact": {ociRef, "--ca-file", ca},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := render(t, append(args, "--set", "replicas=2", "--release-name", "hooks", "--install-namespace", "monitoring")...)
			if err != nil {
				t.Fatal(err)
			}
			if out != want.String() {
				t.Errorf("rendering differs from helm.Render's:\n%s", out)
			}
		})
	}
}

func TestRenderChartValues(t *testing.T) {
	dir := shared(t, "helm/hello-world")
	first := writeFile(t, "first.yaml", "replicaCount: 2\nimage:\n  tag: \"1.27\"\n")
	second := writeFile(t, "second.yaml", "replicaCount: 4\nservice:\n  port: 8080\n")
	replicas := regexp.MustCompile(`(?m)^  replicas: (\d+)$`)
	tests := []struct {
		name         string
		args         []string
		wantReplicas string
		wantLines    []string
	}{
		{"chart defaults", nil, "1", []string{`image: "nginx:1.16.0"`, "- port: 80"}},
		{"files in order", []string{"--values", first, "-f", second}, "4", []string{`image: "nginx:1.27"`, "- port: 8080"}},
		{"--set over files", []string{"--values", first, "--values", second, "--set", "replicaCount=5,image.tag=1.28"}, "5", []string{`image: "nginx:1.28"`, "- port: 8080"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render(t, append([]string{dir}, tt.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if m := replicas.FindStringSubmatch(out); m == nil || m[1] != tt.wantReplicas {
				t.Errorf("replicas %v, want %s", m, tt.wantReplicas)
			}
			for _, l := range tt.wantLines {
				if !strings.Contains(out, l) {
					t.Errorf("output lacks %q:\n%s", l, out)
				}
			}
		})
	}
}

func TestRenderChartErrors(t *testing.T) {
	hello := shared(t, "helm/hello-world")
	broken := t.TempDir()
	if err := os.CopyFS(broken, os.DirFS(hello)); err != nil {
		t.Fatal(err)
	}
	chartYAML := filepath.Join(broken, "Chart.yaml")
	data, err := os.ReadFile(chartYAML)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(chartYAML, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(chartYAML, []byte(strings.Replace(string(data), "apiVersion: v2", "apiVersion: v9", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	plainBundle := filepath.Join(testenv.RepoRoot(), "test/testdata/bundles/plain/combo-v0.0.2")
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"apiVersion v9", []string{broken}, `invalid chart "hello-world": apiVersion 'v9' is not valid. The value must be either "v1" or "v2"`},
		{"--set syntax", []string{hello, "--set", "replicaCount"}, `failed parsing --set data: key "replicaCount" has no value`},
		{"missing values file", []string{hello, "--values", missing}, "open " + missing + ": no such file or directory"},
		{"--kube-version", []string{hello, "--kube-version", "one"}, `--kube-version: could not parse "one" as version`},
		{"values on a plain bundle", []string{plainBundle, "--set", "a=b"}, "--values, --set, --release-name, --kube-version and --api-versions only apply to helm charts"},
		{"--watch-namespaces on a chart", []string{hello, "--watch-namespaces", "a"}, "--watch-namespaces only applies to registry+v1 bundles"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render(t, tt.args...)
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("error:\n%v\nwant:\n%s", err, tt.wantErr)
			}
		})
	}
}
