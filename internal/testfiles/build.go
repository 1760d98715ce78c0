package testfiles

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"testing"
)

// Read returns the regular files under dir as path -> content, paths
// slash-separated under prefix ("" for none).
func Read(tb testing.TB, dir, prefix string) map[string]string {
	tb.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files[path.Join(prefix, filepath.ToSlash(rel))] = string(data)
		return nil
	})
	if err != nil {
		tb.Fatalf("reading %s: %v", dir, err)
	}
	return files
}

// TarGz is a gzipped tar of regular files (name, content), in the order
// given and with no directory entries, as `helm package` and hand-made
// archives lay them out.
func TarGz(tb testing.TB, files ...[2]string) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f[1]))}); err != nil {
			tb.Fatal(err)
		}
		if _, err := tw.Write([]byte(f[1])); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}
