package main

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"testing/fstest"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/rukpak-dev/rukpak/unpack"
)

// maxLayoutBytes bounds what a local image may expand to in memory.
const maxLayoutBytes = 512 << 20

// openOCILayout flattens the single image of an OCI image layout directory
// into an in-memory filesystem.
func openOCILayout(dir string) (fs.FS, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("read OCI layout %s: %w", dir, err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("read OCI layout %s: %w", dir, err)
	}
	if n := len(manifest.Manifests); n != 1 {
		return nil, fmt.Errorf("OCI layout %s holds %d manifests: want exactly one image", dir, n)
	}
	img, err := idx.Image(manifest.Manifests[0].Digest)
	if err != nil {
		return nil, fmt.Errorf("read image %s from OCI layout %s: %w", manifest.Manifests[0].Digest, dir, err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()

	out := fstest.MapFS{}
	tr := tar.NewReader(io.LimitReader(rc, maxLayoutBytes))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read image filesystem: %w", err)
		}
		name, err := unpack.CleanName(hdr.Name)
		if err != nil {
			return nil, fmt.Errorf("read image filesystem: %w", err)
		}
		if name == "." {
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			out[name] = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				return nil, fmt.Errorf("read %s from image: %w", name, err)
			}
			out[name] = &fstest.MapFile{Data: data, Mode: 0o644}
		}
	}
}
