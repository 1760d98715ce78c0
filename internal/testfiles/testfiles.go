// Package testfiles lists a filesystem's content for test assertions, and
// builds test content: a directory read into a map, hand-made archives.
package testfiles

import (
	"io/fs"
	"slices"
	"testing"
)

// List returns every regular file of fsys as "path=content", sorted.
func List(t testing.TB, fsys fs.FS) []string {
	t.Helper()
	var out []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		out = append(out, p+"="+string(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
