package testregistry

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Image stacks layers, first to last, into an image.
func Image(tb testing.TB, layers ...v1.Layer) v1.Image {
	tb.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		tb.Fatalf("building image: %v", err)
	}
	return img
}

// Layer is a layer of regular files, path to content. Parent directories
// get entries of their own. A whiteout is just a file named ".wh.<name>"
// (or ".wh..wh..opq").
func Layer(tb testing.TB, files map[string]string) v1.Layer {
	tb.Helper()
	b, err := filesTar(files)
	if err != nil {
		tb.Fatal(err)
	}
	return LayerFromTar(tb, b)
}

// LayerFromDir is a layer holding dir's regular files and directories
// under prefix (e.g. "manifests"; "" for the root).
func LayerFromDir(tb testing.TB, dir, prefix string) v1.Layer {
	tb.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[path.Join(prefix, filepath.ToSlash(rel))] = string(b)
		return nil
	})
	if err != nil {
		tb.Fatalf("reading %s: %v", dir, err)
	}
	return Layer(tb, files)
}

// LayerFromTar is a layer of an uncompressed tar archive, taken as is
// (hostile entries included). It is gzipped once, up front.
func LayerFromTar(tb testing.TB, tarData []byte) v1.Layer {
	tb.Helper()
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := zw.Write(tarData); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	data := gz.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
	if err != nil {
		tb.Fatalf("building layer: %v", err)
	}
	return layer
}

// filesTar is a deterministic tar of files with their parent directories.
func filesTar(files map[string]string) ([]byte, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, n := range names {
		var parents []string
		for d := path.Dir(n); d != "." && d != "/" && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			parents = append(parents, d)
		}
		slices.Reverse(parents)
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
				return nil, err
			}
		}
		body := files[n]
		if err := tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
			return nil, fmt.Errorf("writing %s: %w", n, err)
		}
		if _, err := io.WriteString(tw, body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
