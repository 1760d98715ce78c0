package helm_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/rukpak-dev/rukpak/internal/testfiles"
	"github.com/rukpak-dev/rukpak/provisioner/helm"
	"github.com/rukpak-dev/rukpak/provisioner/plain"
)

// testdata holds real charts, unmodified (see its README).
const testdata = "../../../shared/testdata/helm"

// charts of the shared test data, with what loading them must give.
var charts = []struct {
	name, version string
	templates     int
	dependencies  []string
}{
	{name: "hello-world", version: "0.1.0", templates: 5},
	{name: "kube-state-metrics", version: "8.4.0", templates: 19},
	{name: "prometheus-operator-admission-webhook", version: "0.43.2", templates: 20},
	{name: "prometheus-operator-crds", version: "31.0.1", templates: 0, dependencies: []string{"crds"}},
}

// dirFS is a chart directory of the test data as a map, under prefix.
func dirFS(t *testing.T, chartName, prefix string) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	for name, data := range testfiles.Read(t, filepath.Join(testdata, chartName), prefix) {
		m[name] = &fstest.MapFile{Data: []byte(data), Mode: 0o644}
	}
	return m
}

// packaged is a chart of the test data as `helm package` writes it.
func packaged(t *testing.T, chartName string) []byte {
	t.Helper()
	ch, err := loader.LoadDir(filepath.Join(testdata, chartName))
	if err != nil {
		t.Fatal(err)
	}
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

func TestLoadChartRealCharts(t *testing.T) {
	for _, c := range charts {
		layouts := map[string]func(t *testing.T) fs.FS{
			"directory at the root": func(t *testing.T) fs.FS { return os.DirFS(filepath.Join(testdata, c.name)) },
			"single top-level directory": func(t *testing.T) fs.FS {
				return dirFS(t, c.name, c.name)
			},
			"helm package archive at the root": func(t *testing.T) fs.FS {
				return fstest.MapFS{c.name + "-" + c.version + ".tgz": {Data: packaged(t, c.name)}}
			},
		}
		for layout, fsys := range layouts {
			t.Run(c.name+"/"+layout, func(t *testing.T) {
				ch, err := helm.LoadChart(fsys(t))
				if err != nil {
					t.Fatal(err)
				}
				if ch.Name() != c.name || ch.Metadata.Version != c.version {
					t.Errorf("loaded %s %s, want %s %s", ch.Name(), ch.Metadata.Version, c.name, c.version)
				}
				if len(ch.Templates) != c.templates {
					t.Errorf("%d templates, want %d", len(ch.Templates), c.templates)
				}
				var deps []string
				for _, d := range ch.Dependencies() {
					deps = append(deps, d.Name())
				}
				if strings.Join(deps, ",") != strings.Join(c.dependencies, ",") {
					t.Errorf("dependencies %v, want %v", deps, c.dependencies)
				}
				if ch.Values == nil {
					t.Error("values.yaml not loaded")
				}
			})
		}
	}
}

// TestLoadChartSameAsHelm: a chart loaded from content is the chart Helm's
// own directory loader loads, file for file.
func TestLoadChartSameAsHelm(t *testing.T) {
	for _, c := range charts {
		t.Run(c.name, func(t *testing.T) {
			want, err := loader.LoadDir(filepath.Join(testdata, c.name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := helm.LoadChart(dirFS(t, c.name, ""))
			if err != nil {
				t.Fatal(err)
			}
			if g, w := rawNames(got.Raw), rawNames(want.Raw); g != w {
				t.Errorf("files:\n%s\nwant:\n%s", g, w)
			}
		})
	}
}

func rawNames(files []*chart.File) string {
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	return strings.Join(names, "\n")
}

func TestLoadChartErrors(t *testing.T) {
	hello := func(t *testing.T) fstest.MapFS { return dirFS(t, "hello-world", "") }
	tests := []struct {
		name    string
		fsys    func(t *testing.T) fs.FS
		limits  helm.Limits
		wantErr string
	}{{
		name: "no Chart.yaml",
		fsys: func(t *testing.T) fs.FS {
			m := hello(t)
			delete(m, "Chart.yaml")
			return m
		},
		wantErr: "loading the chart: Chart.yaml file is missing (looked for at the content's root, in its only directory, and as its only file, a chart .tgz)",
	}, {
		name:    "empty content",
		fsys:    func(*testing.T) fs.FS { return fstest.MapFS{} },
		wantErr: "loading the chart: Chart.yaml file is missing (looked for at the content's root, in its only directory, and as its only file, a chart .tgz)",
	}, {
		name: "chart directory next to other content",
		fsys: func(t *testing.T) fs.FS {
			m := dirFS(t, "hello-world", "hello-world")
			m["README.md"] = &fstest.MapFile{Data: []byte("x")}
			return m
		},
		wantErr: "loading the chart: Chart.yaml file is missing (looked for at the content's root, in its only directory, and as its only file, a chart .tgz)",
	}, {
		name: "apiVersion v9",
		fsys: func(t *testing.T) fs.FS {
			m := hello(t)
			m["Chart.yaml"].Data = bytes.Replace(m["Chart.yaml"].Data, []byte("apiVersion: v2"), []byte("apiVersion: v9"), 1)
			return m
		},
		wantErr: `invalid chart "hello-world": apiVersion 'v9' is not valid. The value must be either "v1" or "v2"`,
	}, {
		name: "no version",
		fsys: func(*testing.T) fs.FS {
			return fstest.MapFS{"Chart.yaml": {Data: []byte("apiVersion: v2\nname: x\n")}}
		},
		wantErr: "loading the chart: validation: chart.metadata.version is required",
	}, {
		name:    "Chart.yaml not YAML",
		fsys:    func(*testing.T) fs.FS { return fstest.MapFS{"Chart.yaml": {Data: []byte("[")}} },
		wantErr: "loading the chart: cannot load Chart.yaml: error converting YAML to JSON: yaml: line 1: did not find expected node content",
	}, {
		name: "dependency missing from charts/",
		fsys: func(t *testing.T) fs.FS {
			m := dirFS(t, "prometheus-operator-crds", "")
			for name := range m {
				if strings.HasPrefix(name, "charts/") {
					delete(m, name)
				}
			}
			return m
		},
		wantErr: "invalid chart \"prometheus-operator-crds\": found in Chart.yaml, but missing in charts/ directory: crds (run `helm dependency build` and include charts/ in the bundle)",
	}, {
		name: "library chart",
		fsys: func(*testing.T) fs.FS {
			return fstest.MapFS{"Chart.yaml": {Data: []byte("apiVersion: v2\nname: lib\nversion: 1.0.0\ntype: library\n")}}
		},
		wantErr: `invalid chart "lib": library charts are not installable`,
	}, {
		name: "archive without a chart directory",
		fsys: func(t *testing.T) fs.FS {
			return fstest.MapFS{"c.tgz": {Data: testfiles.TarGz(t, [2]string{"Chart.yaml", "apiVersion: v2\nname: c\nversion: 1.0.0\n"})}}
		},
		wantErr: `loading the chart: chart illegally contains content outside the base directory: "Chart.yaml"`,
	}, {
		name:    "archive that is not gzip",
		fsys:    func(*testing.T) fs.FS { return fstest.MapFS{"c.tgz": {Data: []byte("apiVersion: v2\n")}} },
		wantErr: "loading the chart: file 'c.tgz' does not appear to be a gzipped archive: gzip: invalid header",
	}, {
		name:    "too many files",
		fsys:    func(t *testing.T) fs.FS { return hello(t) },
		limits:  helm.Limits{MaxFiles: 7},
		wantErr: "loading the chart: the chart has more than 7 files",
	}, {
		name:    "file too large",
		fsys:    func(t *testing.T) fs.FS { return hello(t) },
		limits:  helm.Limits{MaxFileBytes: 1600},
		wantErr: `loading the chart: chart file "templates/_helpers.tpl" is larger than the maximum file size 1600`,
	}, {
		name:    "chart too large",
		fsys:    func(t *testing.T) fs.FS { return dirFS(t, "prometheus-operator-crds", "") },
		limits:  helm.Limits{MaxTotalBytes: 4 << 20},
		wantErr: "loading the chart: the chart's files are larger than the maximum total size 4194304",
	}, {
		// 1 MiB of zeros compresses to 1 KiB: the archive's expanded size
		// is what counts.
		name: "archive expanding past the limit",
		fsys: func(t *testing.T) fs.FS {
			return fstest.MapFS{"c.tgz": {Data: testfiles.TarGz(t,
				[2]string{"c/Chart.yaml", "apiVersion: v2\nname: c\nversion: 1.0.0\n"},
				[2]string{"c/big", strings.Repeat("\x00", 1<<20)})}}
		},
		limits:  helm.Limits{MaxTotalBytes: 1 << 20},
		wantErr: "loading the chart: the chart's files are larger than the maximum total size 1048576",
	}, {
		name: "subchart archive expanding past the limit",
		fsys: func(t *testing.T) fs.FS {
			sub := testfiles.TarGz(t,
				[2]string{"s/Chart.yaml", "apiVersion: v2\nname: s\nversion: 1.0.0\n"},
				[2]string{"s/big", strings.Repeat("\x00", 1<<20)})
			return fstest.MapFS{
				"Chart.yaml":   {Data: []byte("apiVersion: v2\nname: c\nversion: 1.0.0\n")},
				"charts/s.tgz": {Data: sub},
			}
		},
		limits:  helm.Limits{MaxFileBytes: 512 << 10},
		wantErr: `loading the chart: chart file "charts/s.tgz:s/big" is larger than the maximum file size 524288`,
	}, {
		// 4 MiB of "0,": 5 MiB took Helm's loader 514 MiB to decode.
		name: "values.yaml larger than a document may be",
		fsys: func(*testing.T) fs.FS {
			return chartWith("values.yaml", "a: ["+strings.Repeat("0,", 2<<20)+"0]\n")
		},
		wantErr: `loading the chart: chart file "values.yaml" is larger than 3 MiB`,
	}, {
		name: "values.yaml of too many nodes",
		fsys: func(*testing.T) fs.FS {
			return chartWith("values.yaml", "a: ["+strings.Repeat("0,", 1<<20)+"0]\n")
		},
		wantErr: `loading the chart: chart file "values.yaml" has more than 262144 YAML nodes`,
	}, {
		name: "aliases expanding",
		fsys: func(*testing.T) fs.FS {
			return chartWith("values.yaml", "a: &a [0,0,0,0,0,0,0,0,0,0]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n")
		},
		limits:  helm.Limits{YAML: plain.Limits{MaxNodes: 1000}},
		wantErr: `loading the chart: chart file "values.yaml" expands to more than 1000 YAML nodes through aliases`,
	}, {
		name: "subchart values.yaml nested too deep",
		fsys: func(*testing.T) fs.FS {
			m := chartWith("values.yaml", "a: 1\n")
			m["charts/sub/Chart.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: v2\nname: sub\nversion: 1.0.0\n")}
			m["charts/sub/values.yaml"] = &fstest.MapFile{Data: []byte(strings.Repeat("[", 100) + strings.Repeat("]", 100))}
			return m
		},
		limits:  helm.Limits{YAML: plain.Limits{MaxDepth: 50}},
		wantErr: `loading the chart: chart file "charts/sub/values.yaml" is nested more than 50 levels deep`,
	}, {
		// Nesting the scan's estimate misses (brackets before comments,
		// on lines a quote that is none runs over): held to the limit on
		// the values Helm decoded.
		name: "subchart values.yaml nested deeper than the scan sees",
		fsys: func(*testing.T) fs.FS {
			m := chartWith("values.yaml", "a: 1\n")
			m["charts/sub/Chart.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: v2\nname: sub\nversion: 1.0.0\n")}
			m["charts/sub/values.yaml"] = &fstest.MapFile{Data: []byte("k: a - 'x\nj: [ # ]\n" + strings.Repeat(" [ # ]\n", 80) + " x\n" + strings.Repeat("]", 81) + "\n")}
			return m
		},
		limits:  helm.Limits{YAML: plain.Limits{MaxDepth: 50}},
		wantErr: `loading the chart: chart file "charts/sub/values.yaml" is nested more than 50 levels deep`,
	}, {
		name: "Chart.yaml import-values nested deeper than the scan sees",
		fsys: func(*testing.T) fs.FS {
			m := chartWith("values.yaml", "a: 1\n")
			m["Chart.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: v2\nname: c\nversion: 1.0.0\nk: a - 'x\ndependencies:\n- name: sub\n  version: 1.0.0\n  import-values: [ # ]\n" +
				strings.Repeat("   [ # ]\n", 80) + "   x\n   " + strings.Repeat("]", 81) + "\n")}
			m["charts/sub/Chart.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: v2\nname: sub\nversion: 1.0.0\n")}
			return m
		},
		limits:  helm.Limits{YAML: plain.Limits{MaxDepth: 50}},
		wantErr: `loading the chart: chart file "Chart.yaml" is nested more than 50 levels deep`,
	}, {
		name: "values.yaml in a chart archive",
		fsys: func(t *testing.T) fs.FS {
			return fstest.MapFS{"c.tgz": {Data: testfiles.TarGz(t,
				[2]string{"c/Chart.yaml", "apiVersion: v2\nname: c\nversion: 1.0.0\n"},
				[2]string{"c/values.yaml", "a: [" + strings.Repeat("0,", 1000) + "0]\n"})}}
		},
		limits:  helm.Limits{YAML: plain.Limits{MaxNodes: 1000}},
		wantErr: `loading the chart: chart file "c.tgz:c/values.yaml" has more than 1000 YAML nodes`,
	}, {
		name: "YAML files together",
		fsys: func(*testing.T) fs.FS {
			m := chartWith("values.yaml", "a: ["+strings.Repeat("0,", 300)+"0]\n")
			m["charts/sub/Chart.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: v2\nname: sub\nversion: 1.0.0\n")}
			m["charts/sub/values.yaml"] = m["values.yaml"]
			return m
		},
		limits:  helm.Limits{YAML: plain.Limits{MaxNodes: 1000, MaxTotalNodes: 1000}},
		wantErr: "loading the chart: the chart's Chart.yaml, values.yaml, values.schema.json, Chart.lock, requirements.yaml, requirements.lock files have more than 1000 YAML nodes together",
	}, {
		name: "subchart archive of a subchart",
		fsys: func(t *testing.T) fs.FS {
			m := chartWith("values.yaml", "a: 1\n")
			m["charts/sub/Chart.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: v2\nname: sub\nversion: 1.0.0\n")}
			m["charts/sub/charts/deep.tgz"] = &fstest.MapFile{Data: testfiles.TarGz(t,
				[2]string{"deep/Chart.yaml", "apiVersion: v2\nname: deep\nversion: 1.0.0\n"},
				[2]string{"deep/big", strings.Repeat("\x00", 1<<20)})}
			return m
		},
		limits:  helm.Limits{MaxTotalBytes: 1 << 20},
		wantErr: "loading the chart: the chart's files are larger than the maximum total size 1048576",
	}, {
		// Entries of a type no archive writer knows are read as files
		// by Go's tar reader, and by Helm's loader.
		name: "archive expanding past the limit in entries of an unknown type",
		fsys: func(t *testing.T) fs.FS {
			// A regular entry of 2 MiB turned into type 'Z'.
			var raw bytes.Buffer
			tw := tar.NewWriter(&raw)
			_ = tw.WriteHeader(&tar.Header{Name: "c/odd", Typeflag: tar.TypeReg, Size: 2 << 20, Mode: 0o644})
			_, _ = tw.Write(make([]byte, 2<<20))
			_ = tw.Close()
			data := raw.Bytes()
			hdr := data[:512]
			hdr[156] = 'Z'
			copy(hdr[148:156], "        ")
			sum := 0
			for _, c := range hdr {
				sum += int(c)
			}
			copy(hdr[148:156], fmt.Sprintf("%06o\x00 ", sum))
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			_, _ = zw.Write(data)
			_ = zw.Close()
			return fstest.MapFS{"c.tgz": {Data: buf.Bytes()}}
		},
		limits:  helm.Limits{MaxFiles: 10, MaxTotalBytes: 1 << 20, MaxFileBytes: 1 << 20},
		wantErr: `loading the chart: chart file "c.tgz:c/odd" is larger than the maximum file size 1048576`,
	}, {
		// Helm's loader reads them through without counting them.
		name: "archive expanding past the limit in PAX global headers",
		fsys: func(t *testing.T) fs.FS {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			tw := tar.NewWriter(zw)
			for i := range 2 {
				if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: fmt.Sprint("g", i), PAXRecords: map[string]string{"comment": strings.Repeat("x", 600<<10)}}); err != nil {
					t.Fatal(err)
				}
			}
			_ = tw.Close()
			_ = zw.Close()
			return fstest.MapFS{"c.tgz": {Data: buf.Bytes()}}
		},
		limits:  helm.Limits{MaxFiles: 10, MaxTotalBytes: 1 << 20},
		wantErr: "loading the chart: reading chart archive c.tgz: it expands to more than 1071104 bytes",
	}, {
		name: "irregular file",
		fsys: func(t *testing.T) fs.FS {
			m := hello(t)
			m["templates/link.yaml"] = &fstest.MapFile{Mode: fs.ModeSymlink, Data: []byte("../values.yaml")}
			return m
		},
		wantErr: "loading the chart: cannot load irregular file templates/link.yaml as it has file mode type bits set",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := helm.LoadChartLimited(tt.fsys(t), tt.limits)
			if err == nil {
				t.Fatalf("loaded chart %q, want error %q", ch.Name(), tt.wantErr)
			}
			if err.Error() != tt.wantErr {
				t.Errorf("error:\n%s\nwant:\n%s", err, tt.wantErr)
			}
		})
	}
}

// chartWith is a minimal chart with one more file.
func chartWith(name, content string) fstest.MapFS {
	return fstest.MapFS{
		"Chart.yaml": {Data: []byte("apiVersion: v2\nname: c\nversion: 1.0.0\n")},
		name:         {Data: []byte(content)},
	}
}

// TestLoadChartHelmignore: .helmignore applies as `helm install ./dir`
// applies it.
func TestLoadChartHelmignore(t *testing.T) {
	m := dirFS(t, "hello-world", "")
	m[".helmignore"] = &fstest.MapFile{Data: []byte("README.md\nsecrets/\n")}
	m["secrets/key"] = &fstest.MapFile{Data: []byte("x")}
	m["templates/.hidden.yaml"] = &fstest.MapFile{Data: []byte("kind: Secret")}
	ch, err := helm.LoadChart(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ch.Raw {
		switch f.Name {
		case "README.md", "secrets/key", "templates/.hidden.yaml":
			t.Errorf("%s loaded despite .helmignore", f.Name)
		}
	}
}

// TestContentRoundTrip: stored content (Content) loads as the chart it was
// made from, from every layout a source delivers.
func TestContentRoundTrip(t *testing.T) {
	for _, c := range charts {
		for layout, fsys := range map[string]fs.FS{
			"directory":    os.DirFS(filepath.Join(testdata, c.name)),
			"helm package": fstest.MapFS{"c.tgz": {Data: packaged(t, c.name)}},
		} {
			t.Run(c.name+"/"+layout, func(t *testing.T) {
				ch, err := helm.LoadChart(fsys)
				if err != nil {
					t.Fatal(err)
				}
				stored := helm.Content(ch)
				if _, err := fs.Stat(stored, helm.ChartDir+"/Chart.yaml"); err != nil {
					t.Fatalf("stored content has no %s/Chart.yaml: %v", helm.ChartDir, err)
				}
				again, err := helm.LoadChart(stored)
				if err != nil {
					t.Fatal(err)
				}
				if g, w := rawNames(again.Raw), rawNames(ch.Raw); g != w {
					t.Errorf("stored files:\n%s\nwant:\n%s", g, w)
				}
				if len(again.Dependencies()) != len(c.dependencies) || len(again.Templates) != c.templates {
					t.Errorf("stored chart has %d dependencies and %d templates", len(again.Dependencies()), len(again.Templates))
				}
			})
		}
	}
}
