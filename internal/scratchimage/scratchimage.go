// Package scratchimage assembles reproducible container images of static
// binaries on an empty (scratch) base, in code and without Docker: one
// layer, a deterministic tar (sorted names, one mtime, numeric owners only),
// and a config whose every timestamp is the image's creation time. The same
// files and spec always give the same digest.
//
// Both rukpak's own image (hack/image) and the real-node suite's test images
// (internal/nodeimages) are built with it.
package scratchimage

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one file or directory of the layer.
type File struct {
	// Name is the path in the image, without a leading slash.
	Name     string
	Dir      bool
	Mode     int64
	UID, GID int
	Data     []byte
}

// Spec describes one image.
type Spec struct {
	Files []File
	// Created is the image's creation time and every file's mtime; zero
	// is the Unix epoch.
	Created time.Time
	// OS and Arch of the binaries.
	OS, Arch string
	// Gzip compresses the layer, for registries. Without it the layer is a
	// plain tar, as docker save writes it: for tarballs read from a local
	// disk, gzip only costs CPU, on writing (the digest, then the file) and
	// again on every import. The image ID (the config digest) is the same
	// either way.
	Gzip bool
	// History describes the layer (its Created is set to Created).
	History v1.History
	// Config is the image's runtime configuration.
	Config v1.Config
}

// Build assembles the image.
func Build(s Spec) (v1.Image, error) {
	created := s.Created.UTC()
	if s.Created.IsZero() {
		created = time.Unix(0, 0).UTC()
	}
	layerBytes, err := Layer(s.Files, created)
	if err != nil {
		return nil, err
	}
	var layer v1.Layer
	if s.Gzip {
		if layer, err = tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(layerBytes)), nil
		}, tarball.WithMediaType(types.OCILayer)); err != nil {
			return nil, fmt.Errorf("compressing the layer: %w", err)
		}
	} else {
		layer = static.NewLayer(layerBytes, types.OCIUncompressedLayer)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	history := s.History
	history.Created = v1.Time{Time: created}
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: history})
	if err != nil {
		return nil, fmt.Errorf("appending the layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = s.OS, s.Arch
	cf.Created = v1.Time{Time: created}
	cf.Author = ""
	cf.Config = s.Config
	return mutate.ConfigFile(img, cf)
}

// Layer writes files as a deterministic tar: sorted by name, every mtime
// mtime, owners numeric only, PAX headers.
func Layer(files []File, mtime time.Time) ([]byte, error) {
	files = append([]File(nil), files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: f.Name, Mode: f.Mode, Uid: f.UID, Gid: f.GID, Size: int64(len(f.Data)), ModTime: mtime, Format: tar.FormatPAX}
		if f.Dir {
			if len(f.Data) > 0 {
				return nil, fmt.Errorf("%s: a directory cannot hold data", f.Name)
			}
			h.Typeflag, h.Name, h.Size = tar.TypeDir, f.Name+"/", 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("writing %s: %w", f.Name, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, fmt.Errorf("writing %s: %w", f.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing the layer: %w", err)
	}
	return buf.Bytes(), nil
}

// Nobody is the user and group id that every image already knows.
const Nobody = 65534

// Accounts returns /etc, /etc/passwd and /etc/group naming root, nobody and
// user (uid:gid, home directory home), so that tools inside the container
// and `ps` on the node show a name for the image's user. A user that is
// nobody is not listed twice.
func Accounts(user string, uid, gid int, home string) []File {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:%d:%d:nobody:/nonexistent:/sbin/nologin\n", Nobody, Nobody)
	group := fmt.Sprintf("root:x:0:\nnobody:x:%d:\n", Nobody)
	if uid != Nobody {
		passwd += fmt.Sprintf("%s:x:%d:%d:%s:%s:/sbin/nologin\n", user, uid, gid, user, home)
	}
	if gid != Nobody {
		group += fmt.Sprintf("%s:x:%d:\n", user, gid)
	}
	return []File{
		{Name: "etc", Dir: true, Mode: 0o755},
		{Name: "etc/passwd", Mode: 0o644, Data: []byte(passwd)},
		{Name: "etc/group", Mode: 0o644, Data: []byte(group)},
	}
}

// ErrNotELF is CheckStatic's error for data that is no ELF file at all.
var ErrNotELF = errors.New("not an ELF binary")

// CheckStatic returns an error unless data is a statically linked ELF
// executable (no program interpreter, no dynamic section): nothing else
// runs on a scratch base.
func CheckStatic(data []byte) error {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotELF, err)
	}
	for _, p := range f.Progs {
		switch p.Type {
		case elf.PT_INTERP:
			return errors.New("dynamically linked (has a program interpreter); build with CGO_ENABLED=0")
		case elf.PT_DYNAMIC:
			return errors.New("has a dynamic section; build with CGO_ENABLED=0")
		}
	}
	return nil
}

// Entry is one file of an image's layer, read back.
type Entry struct {
	Header *tar.Header
	Data   []byte
}

// Contents reads back the files of img, an image of one layer as Build
// makes them, in the layer's order. It reads the whole layer into memory:
// it is for checking images this package built, not images from elsewhere.
func Contents(img v1.Image) ([]Entry, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("listing layers: %w", err)
	}
	if len(layers) != 1 {
		return nil, fmt.Errorf("want one layer, got %d", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return nil, fmt.Errorf("opening the layer: %w", err)
	}
	defer func() { _ = rc.Close() }()
	var out []Entry
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the layer: %w", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", h.Name, err)
		}
		out = append(out, Entry{Header: h, Data: data})
	}
}
