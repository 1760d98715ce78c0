package fbc

import (
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// realCatalogs is the shared test data: four packages' FBC from the
// community catalog.
var realCatalogs = []struct {
	name              string
	channels, bundles int
	defaultChannel    string
}{
	{"cat-facts-operator", 1, 4, ""},
	{"infinispan", 4, 49, ""},
	{"kube-green", 1, 10, "alpha"},
	{"sailoperator", 10, 32, ""},
}

func testdata(t testing.TB) string {
	t.Helper()
	return testenv.SharedTestdata("catalogs")
}

func realFile(t testing.TB, pkg string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testdata(t), pkg, "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestBuildRealCatalogs(t *testing.T) {
	all := fstest.MapFS{}
	for _, c := range realCatalogs {
		data := realFile(t, c.name)
		all[c.name+"/catalog.yaml"] = &fstest.MapFile{Data: data}
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			x, err := Build(fstest.MapFS{"catalog.yaml": {Data: data}}, dir, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if x.Counts.Packages != 1 || x.Counts.Channels != c.channels || x.Counts.Bundles != c.bundles {
				t.Fatalf("counts %+v, want 1 package, %d channels, %d bundles", x.Counts, c.channels, c.bundles)
			}
			p, err := ReadPackage(dir, x, c.name)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Channels) != c.channels || len(p.Bundles) != c.bundles {
				t.Fatalf("ReadPackage: %d channels, %d bundles", len(p.Channels), len(p.Bundles))
			}
			for _, b := range p.Bundles {
				if b.Version == "" || b.Image == "" {
					t.Fatalf("bundle %q: version %q image %q", b.Name, b.Version, b.Image)
				}
			}
		})
	}
	t.Run("together", func(t *testing.T) {
		dir := t.TempDir()
		x, err := Build(all, dir, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if x.Counts.Packages != len(realCatalogs) {
			t.Fatalf("counts %+v", x.Counts)
		}
		t.Logf("counts %+v, %d bytes, %s", x.Counts, x.Size, x.Digest)
	})
}
