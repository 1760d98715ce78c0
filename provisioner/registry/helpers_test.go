package registry

import (
	"io/fs"
	"testing"
	"testing/fstest"
)

func fstestCopy(tb testing.TB, src fs.FS) fstest.MapFS {
	tb.Helper()
	out := fstest.MapFS{}
	if err := copyTree(out, src, "."); err != nil {
		tb.Fatal(err)
	}
	return out
}
