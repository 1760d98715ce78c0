package resolve

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"testing/fstest"

	"github.com/rukpak-dev/rukpak/catalog/fbc"
)

// TestFromPackages: a package stored by fbc.Build and read back with
// fbc.ReadPackage resolves exactly as the catalog's own blobs do, for every
// installed version of every real package under both policies.
func TestFromPackages(t *testing.T) {
	for name, direct := range realCatalogs(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			data, err := os.ReadFile(filepath.Join(testdataDir(), name, "catalog.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			// Only the catalog: kube-green's directory also holds its bundles.
			x, err := fbc.Build(fstest.MapFS{"catalog.yaml": {Data: data}}, dir, fbc.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			p, err := fbc.ReadPackage(dir, x, name)
			if err != nil {
				t.Fatal(err)
			}
			stored := mustIndex(t, FromPackages(p, nil))
			want := mustIndex(t, direct)
			installed := []*Installed{nil}
			for _, b := range want.packages[name].bundles {
				installed = append(installed, &Installed{Name: b.name, Version: b.versionText})
			}
			for _, policy := range []Policy{CatalogProvided, SelfCertified} {
				for _, in := range installed {
					req := Request{PackageName: name, Policy: policy, Installed: in}
					got, gotErr := Resolve(req, []Catalog{{Name: "c", Index: stored}})
					exp, expErr := Resolve(req, []Catalog{{Name: "c", Index: want}})
					if !reflect.DeepEqual(got, exp) || (gotErr == nil) != (expErr == nil) {
						t.Errorf("%s from %+v: stored %+v, %v; direct %+v, %v", policy, in, got, gotErr, exp, expErr)
					}
				}
			}
		})
	}
}

func TestBundleByImage(t *testing.T) {
	idx := mustIndex(t, realCatalogs(t)["kube-green"])
	p := idx.packages["kube-green"]
	for _, b := range p.bundles {
		got, ok := idx.BundleByImage("kube-green", b.image)
		if !ok || got != (Installed{Name: b.name, Version: b.versionText}) {
			t.Errorf("BundleByImage(%q) = %+v, %v; want %s %s", b.image, got, ok, b.name, b.versionText)
		}
	}
	for _, tc := range []struct{ pkg, image string }{
		{"kube-green", ""},
		{"kube-green", "quay.io/nowhere/kube-green@sha256:00"},
		{"no-such-package", p.bundles[0].image},
	} {
		if got, ok := idx.BundleByImage(tc.pkg, tc.image); ok {
			t.Errorf("BundleByImage(%q, %q) = %+v, want none", tc.pkg, tc.image, got)
		}
	}
}
