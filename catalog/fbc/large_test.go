package fbc_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rukpak-dev/rukpak/catalog/fbc"
	"github.com/rukpak-dev/rukpak/internal/heapwatch"
	"github.com/rukpak-dev/rukpak/internal/testcatalog"
)

// TestBuildLargeCatalog builds a catalog of ~20 MB (the community
// catalog's size) and holds the live heap's growth to a fraction of the
// provisioner's 64 MiB budget for a catalog.
func TestBuildLargeCatalog(t *testing.T) {
	// Not parallel: it measures the heap of this process.
	// On disk, as an unpacked source is.
	src := t.TempDir()
	size := func() int {
		data := testcatalog.Large(t, 20<<20)
		if err := os.WriteFile(filepath.Join(src, "catalog.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		return len(data)
	}()
	fsys := os.DirFS(src)
	dir := t.TempDir()
	var x *fbc.Index
	var err error
	peak, allocs, took := heapwatch.Measure(func() { x, err = fbc.Build(fsys, dir, fbc.Limits{}) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f MB, %+v: %s, live heap +%.1f MiB peak, %.0f MiB allocated", float64(size)/1e6, x.Counts, took.Round(time.Millisecond), float64(peak)/(1<<20), float64(allocs)/(1<<20))
	if peak > 16<<20 {
		t.Fatalf("live heap grew %.1f MiB building the catalog, want ≤ 16 MiB", float64(peak)/(1<<20))
	}
	var p *fbc.Package
	peak, _, took = heapwatch.Measure(func() { p, err = fbc.ReadPackage(dir, x, "sailoperator-c3") })
	if err != nil || len(p.Bundles) != 32 {
		t.Fatalf("ReadPackage: %v", err)
	}
	t.Logf("ReadPackage: %s, live heap +%.1f MiB", took, float64(peak)/(1<<20))
}
