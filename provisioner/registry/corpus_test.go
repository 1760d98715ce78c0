package registry

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/provisioner/plain"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

const corpusDir = "../../../shared/testdata/registry-v1"

func corpusBundle(tb testing.TB, name string) fs.FS {
	tb.Helper()
	dir := filepath.Join(corpusDir, name)
	if _, err := os.Stat(dir); err != nil {
		tb.Skipf("shared test data not available: %v", err)
	}
	return os.DirFS(dir)
}

// dump renders converted content as one document per manifest, each headed by
// its file name, so golden files pin names and bytes.
func dump(t *testing.T, fsys fs.FS) []byte {
	t.Helper()
	entries, err := fs.ReadDir(fsys, plain.ManifestsDir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, e := range entries {
		p := path.Join(plain.ManifestsDir, e.Name())
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString("---\n# " + p + "\n")
		// CRDs are passed through unchanged (TestCRDsPassThrough); pin them
		// by digest so golden files stay readable.
		if strings.Contains(e.Name(), "_customresourcedefinition_") {
			fmt.Fprintf(&buf, "# sha256:%x\n", sha256.Sum256(data))
			continue
		}
		// Stored as JSON; pinned as YAML, which reviews better.
		objs, err := plain.Decode(p, data)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range objs {
			if i > 0 {
				buf.WriteString("---\n")
			}
			text, err := yaml.Marshal(o.Object)
			if err != nil {
				t.Fatal(err)
			}
			buf.Write(text)
		}
	}
	return buf.Bytes()
}

// TestCorpus converts every real community bundle, or checks the exact
// reason it cannot be converted.
func TestCorpus(t *testing.T) {
	// Bundles without AllNamespaces install in OwnNamespace (the install
	// namespace only) when no watch namespaces are configured.
	tests := []struct {
		bundle  string
		variant string // subtest name suffix
		golden  string // testdata/golden/<golden>.yaml; empty when an error is expected
		opts    Options
		wantErr string
	}{
		// Bundles with webhooks, in every install mode they support.
		{bundle: "cert-manager-1.6.2", golden: "cert-manager-1.6.2"},
		{
			bundle:  "cert-manager-1.6.2",
			variant: "own",
			opts:    Options{InstallNamespace: "cert-manager", WatchNamespaces: []string{"cert-manager"}},
			wantErr: `ClusterServiceVersion "cert-manager.v1.6.2" does not support install mode OwnNamespace (install namespace "cert-manager", watch namespaces ["cert-manager"]); supported install modes: AllNamespaces`,
		},
		{bundle: "opentelemetry-operator-0.158.0", golden: "opentelemetry-operator-0.158.0"},
		{bundle: "infinispan-2.5.14", variant: "all", golden: "infinispan-2.5.14-all"},
		{
			bundle:  "infinispan-2.5.14",
			variant: "own",
			golden:  "infinispan-2.5.14-own",
			opts:    Options{InstallNamespace: "infinispan", WatchNamespaces: []string{"infinispan"}},
		},
		{
			bundle:  "infinispan-2.5.14",
			variant: "single",
			golden:  "infinispan-2.5.14-single",
			opts:    Options{InstallNamespace: "infinispan", WatchNamespaces: []string{"apps"}},
		},
		{
			bundle:  "infinispan-2.5.14",
			variant: "multi",
			golden:  "infinispan-2.5.14-multi",
			opts:    Options{InstallNamespace: "infinispan", WatchNamespaces: []string{"team-a", "team-b"}},
		},
		{bundle: "marin3r-0.13.1", variant: "all", golden: "marin3r-0.13.1-all"},
		{
			bundle:  "marin3r-0.13.1",
			variant: "cert-manager",
			golden:  "marin3r-0.13.1-cert-manager",
			opts:    Options{CertificateProvider: CertProviderCertManager},
		},
		{
			bundle:  "marin3r-0.13.1",
			variant: "own",
			golden:  "marin3r-0.13.1-own",
			opts:    Options{InstallNamespace: "marin3r", WatchNamespaces: []string{"marin3r"}},
		},
		{
			bundle:  "marin3r-0.13.1",
			variant: "single",
			golden:  "marin3r-0.13.1-single",
			opts:    Options{InstallNamespace: "marin3r", WatchNamespaces: []string{"apps"}},
		},
		{
			bundle:  "marin3r-0.13.1",
			variant: "multi",
			golden:  "marin3r-0.13.1-multi",
			opts:    Options{InstallNamespace: "marin3r", WatchNamespaces: []string{"team-a", "team-b"}},
		},
		{bundle: "community-trivy-operator-2.4.0", golden: "community-trivy-operator-2.4.0"},
		{
			// OwnNamespace only: the default is OwnNamespace in the suggested
			// namespace, the same as asking for it.
			bundle:  "community-windows-machine-config-operator-3.0.0",
			variant: "default",
			golden:  "community-windows-machine-config-operator-3.0.0",
		},
		{
			bundle:  "community-windows-machine-config-operator-3.0.0",
			variant: "own",
			golden:  "community-windows-machine-config-operator-3.0.0",
			opts:    Options{WatchNamespaces: []string{"openshift-windows-machine-config-operator"}},
		},
		{
			bundle:  "community-windows-machine-config-operator-3.0.0",
			variant: "explicit-all",
			opts:    Options{WatchNamespaces: []string{""}},
			wantErr: `ClusterServiceVersion "community-windows-machine-config-operator.v3.0.0" does not support install mode AllNamespaces, which watchNamespaces [""] selects (supported install modes: OwnNamespace)`,
		},
		{bundle: "etcd-0.9.4", variant: "default", golden: "etcd-0.9.4-default"},
		{
			bundle:  "etcd-0.9.4",
			variant: "own",
			golden:  "etcd-0.9.4",
			opts:    Options{InstallNamespace: "etcd", WatchNamespaces: []string{"etcd"}},
		},
		{
			bundle:  "etcd-0.9.4",
			variant: "explicit-all",
			opts:    Options{WatchNamespaces: []string{""}},
			wantErr: `ClusterServiceVersion "etcdoperator.v0.9.4" does not support install mode AllNamespaces, which watchNamespaces [""] selects (supported install modes: OwnNamespace, SingleNamespace)`,
		},
		{bundle: "konveyor-operator-0.3.1", variant: "default", golden: "konveyor-operator-0.3.1-default"},
		{
			bundle:  "konveyor-operator-0.3.1",
			variant: "multi",
			golden:  "konveyor-operator-0.3.1",
			opts:    Options{WatchNamespaces: []string{"team-a", "team-b"}},
		},
		{bundle: "l5-operator-0.0.2", golden: "l5-operator-0.0.2"},
		{bundle: "prometheus-0.47.0", variant: "default", golden: "prometheus-0.47.0-default"},
		{
			bundle:  "prometheus-0.47.0",
			variant: "single",
			golden:  "prometheus-0.47.0",
			opts:    Options{InstallNamespace: "monitoring", WatchNamespaces: []string{"apps"}},
		},
	}
	for _, tc := range tests {
		name := tc.bundle
		if tc.variant != "" {
			name += "/" + tc.variant
		}
		if tc.wantErr != "" {
			name += "/error"
		}
		t.Run(name, func(t *testing.T) {
			src := corpusBundle(t, tc.bundle)
			out, err := Convert(src, tc.opts)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("got error %v\nwant %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			if err := plain.Validate(out); err != nil {
				t.Fatalf("converted content is not valid plain+v0: %v", err)
			}
			got := dump(t, out)
			checkGolden(t, filepath.Join("testdata", "golden", tc.golden+".yaml"), got)

			// The stored source re-renders to the same bytes.
			if !IsRegistryContent(out) {
				t.Fatal("IsRegistryContent = false for converted content")
			}
			sub, err := fs.Sub(out, SourceDir)
			if err != nil {
				t.Fatal(err)
			}
			again, err := Convert(sub, tc.opts)
			if err != nil {
				t.Fatalf("re-converting the stored source: %v", err)
			}
			if !bytes.Equal(dump(t, again), got) {
				t.Fatal("re-converting the stored source gave different output")
			}
		})
	}
}

func TestCRDsPassThrough(t *testing.T) {
	src := corpusBundle(t, "prometheus-0.47.0")
	out, err := Convert(src, Options{WatchNamespaces: []string{"prometheus-system"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]interface{}{}
	files, err := plain.Files(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		for _, o := range f.Objects {
			if o.GetKind() == "CustomResourceDefinition" {
				want[o.GetName()] = o.Object
			}
		}
	}
	objs, err := plain.Objects(out)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		seen++
		if !reflect.DeepEqual(o.Object, want[o.GetName()]) {
			t.Errorf("CustomResourceDefinition %s changed in conversion", o.GetName())
		}
	}
	if seen != 8 || len(want) != 8 {
		t.Fatalf("got %d CRDs out of %d in the bundle, want 8 of 8", seen, len(want))
	}
}

func checkGolden(t *testing.T, file string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("output differs from %s (run go test -update and review the diff)", file)
	}
}

func TestCorpusDependencies(t *testing.T) {
	got, err := Dependencies(corpusBundle(t, "l5-operator-0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"olm.package crunchy-postgres-operator (5.1.0)",
		"olm.gvk postgres-operator.crunchydata.com/v1beta1 PostgresCluster",
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func BenchmarkConvert(b *testing.B) {
	src := corpusBundle(b, "prometheus-0.47.0")
	// Read the bundle once so the benchmark measures conversion, not disk.
	mem := fstestCopy(b, src)
	opts := Options{WatchNamespaces: []string{"prometheus-system"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Convert(mem, opts); err != nil {
			b.Fatal(err)
		}
	}
}
