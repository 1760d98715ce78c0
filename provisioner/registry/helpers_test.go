package registry

import (
	"io/fs"
	"path"
	"testing"
	"testing/fstest"
)

// fstestCopy reads the regular files of src into memory.
func fstestCopy(tb testing.TB, src fs.FS) fstest.MapFS {
	tb.Helper()
	out := fstest.MapFS{}
	err := fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := fs.ReadFile(src, p)
		out[path.Clean(p)] = &fstest.MapFile{Data: data, Mode: 0o644}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}
