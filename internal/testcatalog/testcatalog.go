// Package testcatalog generates large file-based catalogs for tests from
// the real catalogs of the shared test data. Only tests import it.
package testcatalog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/rukpak-dev/rukpak/catalog/fbc"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// Packages are the packages of the shared test data's catalogs.
var Packages = []string{"cat-facts-operator", "infinispan", "kube-green", "sailoperator"}

// Dir is the shared test data's catalogs directory.
func Dir() string { return testenv.SharedTestdata("catalogs") }

// Large returns a catalog of at least size bytes of JSON lines: renamed
// copies of the four real packages (package p becomes p-c<i>, which renames
// its bundles and references too), as one file's content.
func Large(tb testing.TB, size int) []byte {
	tb.Helper()
	all := fstest.MapFS{}
	for _, p := range Packages {
		data, err := os.ReadFile(filepath.Join(Dir(), p, "catalog.yaml"))
		if err != nil {
			tb.Fatal(err)
		}
		all[p+"/catalog.yaml"] = &fstest.MapFile{Data: data}
	}
	dir := tb.TempDir()
	if _, err := fbc.Build(all, dir, fbc.Limits{}); err != nil {
		tb.Fatal(err)
	}
	one, err := os.ReadFile(filepath.Join(dir, fbc.DocumentFile))
	if err != nil {
		tb.Fatal(err)
	}
	var out bytes.Buffer
	out.Grow(size + len(one))
	for i := 0; out.Len() < size; i++ {
		c := one
		for _, p := range Packages {
			c = bytes.ReplaceAll(c, []byte(p), fmt.Appendf(nil, "%s-c%d", p, i))
		}
		out.Write(c)
	}
	return out.Bytes()
}
