package main

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/archive"
)

// bundleFS is a bundle's content as the provisioner would see it, in an
// unpack tree under a temporary directory that close removes.
type bundleFS struct {
	fs.FS
	tree *unpack.Tree
}

func (b *bundleFS) close() { _ = b.tree.Discard() }

// openBundle returns the bundle of a directory, or of the single image of
// an OCI layout directory, unpacked through the provisioner's rules: a
// directory is streamed as the tar archive an image build of it would be
// and extracted as the provisioner extracts image layers, so links and
// limits mean the same here as in a cluster. A symlink leaving the bundle
// is refused; one inside it is not followed (the provisioner does not
// materialise links); a file with several hard links is a regular file, as
// the provisioner's copy of a hardlink entry is.
func openBundle(ctx context.Context, dir string, limits unpack.Limits) (*bundleFS, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	tree, err := unpack.NewTempTree(os.TempDir(), "rukpakctl-", limits)
	if err != nil {
		return nil, err
	}
	extract := extractDir
	if _, statErr := os.Stat(filepath.Join(dir, "oci-layout")); statErr == nil {
		extract = extractOCILayout
	}
	if err := extract(ctx, dir, tree); err != nil {
		_ = tree.Discard()
		return nil, err
	}
	return &bundleFS{FS: tree.FS(), tree: tree}, nil
}

// extractDir streams dir as a tar archive into archive.Extract.
func extractDir(ctx context.Context, dir string, tree *unpack.Tree) error {
	pr, pw := io.Pipe()
	written := make(chan error, 1)
	go func() {
		err := writeTar(dir, pw)
		_ = pw.CloseWithError(err)
		written <- err
	}()
	err := archive.Extract(ctx, pr, tree, archive.Options{})
	if err == nil {
		// The end-of-archive padding.
		_, err = io.Copy(io.Discard, pr)
	}
	_ = pr.CloseWithError(errStopped)
	if werr := <-written; werr != nil && !errors.Is(werr, errStopped) {
		// The directory could not be read: that, not the cut archive.
		return werr
	}
	return err
}

var errStopped = errors.New("extraction stopped")

// writeTar writes the tree under root as a tar archive without following
// any symlink (the root itself excepted): links are written as links, for
// the extractor to judge.
func writeTar(root string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info() // lstat: a link is reported as a link
		if err != nil {
			return err
		}
		if info.Mode()&fs.ModeSocket != 0 {
			return nil // not representable in tar; the provisioner skips special files anyway
		}
		var target string
		if info.Mode()&fs.ModeSymlink != 0 {
			if target, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, target)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		hdr.Name = filepath.ToSlash(rel)
		hdr.Uname, hdr.Gname = "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		return copyFile(tw, p, hdr.Size)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// copyFile writes exactly size bytes of the file at p: the size the header
// announced, even if the file changed since.
func copyFile(w io.Writer, p string, size int64) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.CopyN(w, f, size); err != nil {
		return fmt.Errorf("reading %s: %w", p, err)
	}
	return nil
}

// maxLayoutMetadata bounds the index and the manifest of an OCI layout,
// which go-containerregistry reads whole: the bound the provisioner puts on
// a registry's manifests (the size the distribution spec asks registries to
// accept).
const maxLayoutMetadata = 4 << 20

// extractOCILayout extracts the layers of the single image of an OCI image
// layout directory in order, with whiteouts, as the provisioner extracts a
// pulled image. The layer count is checked on the manifest before any
// per-layer work: go-containerregistry's layout image decodes the manifest
// again for every layer it is asked for (5,000 layers took 80 s of CPU).
func extractOCILayout(ctx context.Context, dir string, tree *unpack.Tree) error {
	if err := fitsMetadata(filepath.Join(dir, "index.json")); err != nil {
		return fmt.Errorf("read OCI layout %s: %w", dir, err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return fmt.Errorf("read OCI layout %s: %w", dir, err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		return fmt.Errorf("read OCI layout %s: %w", dir, err)
	}
	if n := len(manifest.Manifests); n != 1 {
		return fmt.Errorf("OCI layout %s holds %d manifests: want exactly one image", dir, n)
	}
	digest := manifest.Manifests[0].Digest
	if err := fitsMetadata(filepath.Join(dir, "blobs", digest.Algorithm, digest.Hex)); err != nil {
		return fmt.Errorf("read image %s from OCI layout %s: %w", digest, dir, err)
	}
	img, err := idx.Image(digest)
	if err != nil {
		return fmt.Errorf("read image %s from OCI layout %s: %w", digest, dir, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return fmt.Errorf("read image %s from OCI layout %s: %w", digest, dir, err)
	}
	if maxLayers := tree.Limits().MaxLayers; len(m.Layers) > maxLayers {
		return fmt.Errorf("image has %d layers, more than the limit of %d", len(m.Layers), maxLayers)
	}
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("read image %s from OCI layout %s: %w", digest, dir, err)
	}
	for i, layer := range layers {
		if err := extractLayer(ctx, layer.Uncompressed, tree); err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
	}
	return nil
}

// fitsMetadata refuses a layout file larger than maxLayoutMetadata before
// it is read.
func fitsMetadata(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.Size() > maxLayoutMetadata {
		return fmt.Errorf("%s is %d bytes, more than the limit of %d", filepath.Base(p), fi.Size(), maxLayoutMetadata)
	}
	return nil
}

func extractLayer(ctx context.Context, open func() (io.ReadCloser, error), tree *unpack.Tree) error {
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	return archive.Extract(ctx, rc, tree, archive.Options{Whiteouts: true})
}
