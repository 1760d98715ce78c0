// Command image builds rukpak's container image without Docker: one OCI
// image holding the static binaries /provisioner and /webhook on a scratch
// base assembled in code (a nonroot user 65532, /tmp, CA certificates),
// written as a docker-loadable tarball (kind load image-archive; its layer
// uncompressed, as docker save writes it), an OCI layout, and/or pushed to
// a registry (both gzip-compressed).
//
//	go run ./hack/image --tarball bin/rukpak-image.tar --image rukpak:devel
//	go run ./hack/image --push registry.example.com/rukpak:dev
//
// The output is reproducible: the same binaries, CA bundle and labels give
// the same digest (timestamps come from SOURCE_DATE_EPOCH, else the Unix
// epoch).
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Binaries are the files copied from the binary directory to the image root.
var Binaries = []string{"provisioner", "webhook"}

// DefaultCACerts is where Debian-like build machines keep their CA bundle.
const DefaultCACerts = "/etc/ssl/certs/ca-certificates.crt"

// NonRoot is the user and group the image runs as (distroless's nonroot).
const NonRoot = 65532

// Options describe one image.
type Options struct {
	// BinDir holds the binaries named in Binaries.
	BinDir string
	// CACerts is a PEM bundle copied to /etc/ssl/certs/ca-certificates.crt;
	// empty or missing leaves it out.
	CACerts string
	// Source, Version and Revision fill the OCI labels.
	Source, Version, Revision string
	// Created is the image's creation time and every file's mtime.
	Created time.Time
	// OS and Arch of the binaries; Arch defaults to runtime.GOARCH.
	OS, Arch string
	// Uncompressed stores the layer as a plain tar, as docker save does:
	// for the local tarball, which is read from disk and never downloaded,
	// gzip only costs CPU, twice on writing (the digest, then the file)
	// and again on every import. The image ID (the config digest) is the
	// same either way.
	Uncompressed bool
}

// Build assembles the image.
func Build(o Options) (v1.Image, error) {
	if o.OS == "" {
		o.OS = "linux"
	}
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	created := o.Created.UTC()
	layerBytes, err := rootfs(o, created)
	if err != nil {
		return nil, err
	}
	var layer v1.Layer
	if o.Uncompressed {
		layer = static.NewLayer(layerBytes, types.OCIUncompressedLayer)
	} else if layer, err = tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer)); err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "hack/image: " + strings.Join(Binaries, ", ") + ", passwd, group, tmp, CA certificates",
			Comment:   "rukpak",
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = o.OS, o.Arch
	cf.Created = v1.Time{Time: created}
	cf.Author = ""
	cf.Config = v1.Config{
		// The manifests set command: /provisioner or /webhook.
		User:       fmt.Sprintf("%d:%d", NonRoot, NonRoot),
		WorkingDir: "/",
		Env: []string{
			"PATH=/",
			"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
		},
		Labels: map[string]string{
			"org.opencontainers.image.title":    "rukpak",
			"org.opencontainers.image.source":   o.Source,
			"org.opencontainers.image.version":  o.Version,
			"org.opencontainers.image.revision": o.Revision,
			"org.opencontainers.image.created":  created.Format(time.RFC3339),
		},
	}
	return mutate.ConfigFile(img, cf)
}

// entry is one file or directory of the layer.
type entry struct {
	name     string
	dir      bool
	mode     int64
	uid, gid int
	data     []byte
}

// rootfs writes the single layer: a deterministic tar (sorted names, fixed
// mtimes, numeric owners only).
func rootfs(o Options, mtime time.Time) ([]byte, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRoot, NonRoot)
	group := fmt.Sprintf("root:x:0:\nnobody:x:65534:\nnonroot:x:%d:\n", NonRoot)
	entries := []entry{
		{name: "etc", dir: true, mode: 0o755},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "home", dir: true, mode: 0o755},
		{name: "home/nonroot", dir: true, mode: 0o700, uid: NonRoot, gid: NonRoot},
		{name: "tmp", dir: true, mode: 0o1777},
	}
	if o.CACerts != "" {
		data, err := os.ReadFile(o.CACerts)
		switch {
		case errors.Is(err, os.ErrNotExist):
			fmt.Fprintf(os.Stderr, "image: %s not found; the image has no CA certificates\n", o.CACerts)
		case err != nil:
			return nil, err
		default:
			entries = append(entries,
				entry{name: "etc/ssl", dir: true, mode: 0o755},
				entry{name: "etc/ssl/certs", dir: true, mode: 0o755},
				entry{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: data})
		}
	}
	for _, b := range Binaries {
		data, err := readBinary(filepath.Join(o.BinDir, b))
		if err != nil {
			return nil, err
		}
		entries = append(entries, entry{name: b, mode: 0o755, data: data})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, Size: int64(len(e.data)), ModTime: mtime, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag, h.Name, h.Size = tar.TypeDir, e.name+"/", 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readBinary reads a binary and refuses dynamically linked ELF files, which
// could not run on a scratch base (build with CGO_ENABLED=0).
func readBinary(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w (run: CGO_ENABLED=0 go build -o bin/ ./cmd/...)", err)
	}
	if f, err := elf.NewFile(bytes.NewReader(data)); err == nil {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				return nil, fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0", path)
			}
		}
	}
	return data, nil
}

// sourceDate is SOURCE_DATE_EPOCH, else the Unix epoch.
func sourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func git(args ...string) string {
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		o                           Options
		imageName, tarPath, ociPath string
		push                        string
	)
	flag.StringVar(&o.BinDir, "bin-dir", "bin", "Directory holding the static provisioner and webhook binaries.")
	flag.StringVar(&o.CACerts, "ca-certs", DefaultCACerts, "PEM CA bundle copied into the image when present; empty leaves it out.")
	flag.StringVar(&o.Source, "source", "https://github.com/rukpak-dev/rukpak", "org.opencontainers.image.source label.")
	flag.StringVar(&o.Version, "version", "", "org.opencontainers.image.version label (default: git describe --tags --always --dirty, else devel).")
	flag.StringVar(&o.Revision, "revision", "", "org.opencontainers.image.revision label (default: git rev-parse HEAD).")
	flag.StringVar(&o.Arch, "arch", runtime.GOARCH, "Architecture of the binaries.")
	flag.StringVar(&imageName, "image", "rukpak:devel", "Image name written into the tarball (what docker load / kind load tag it as).")
	flag.StringVar(&tarPath, "tarball", "", "Write a docker-loadable tarball here (kind load image-archive FILE).")
	flag.StringVar(&ociPath, "oci-layout", "", "Write (or add to) an OCI image layout directory here.")
	flag.StringVar(&push, "push", "", "Push the image to this reference with the default keychain (~/.docker/config.json, credential helpers).")
	flag.Parse()
	if tarPath == "" && ociPath == "" && push == "" {
		return errors.New("nothing to do: give --tarball, --oci-layout and/or --push")
	}
	if o.Revision == "" {
		o.Revision = git("rev-parse", "HEAD")
	}
	if o.Version == "" {
		if o.Version = git("describe", "--tags", "--always", "--dirty"); o.Version == "" {
			o.Version = "devel"
		}
	}
	created, err := sourceDate()
	if err != nil {
		return err
	}
	o.Created = created
	if tarPath != "" {
		local := o
		local.Uncompressed = true
		img, err := Build(local)
		if err != nil {
			return err
		}
		if err := write(img, imageName, tarPath, "", ""); err != nil {
			return err
		}
	}
	if ociPath == "" && push == "" {
		return nil
	}
	img, err := Build(o)
	if err != nil {
		return err
	}
	return write(img, imageName, "", ociPath, push, remote.WithAuthFromKeychain(authn.DefaultKeychain))
}

// write outputs img as a tarball tagged imageName, into an OCI layout,
// and/or pushes it to the push reference.
func write(img v1.Image, imageName, tarPath, ociPath, push string, remoteOpts ...remote.Option) error {
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if tarPath != "" {
		tag, err := name.NewTag(imageName)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(tarPath), 0o755); err != nil {
			return err
		}
		if err := tarball.WriteToFile(tarPath, tag, img); err != nil {
			return err
		}
		fmt.Printf("wrote %s (%s, %s)\n", tarPath, tag, digest)
	}
	if ociPath != "" {
		p, err := layout.FromPath(ociPath)
		if err != nil {
			if p, err = layout.Write(ociPath, empty.Index); err != nil {
				return err
			}
		}
		// One entry per image name: rebuilding replaces it.
		refName := map[string]string{imagespec.AnnotationRefName: imageName}
		if err := p.ReplaceImage(img, match.Annotation(imagespec.AnnotationRefName, imageName), layout.WithAnnotations(refName)); err != nil {
			return err
		}
		fmt.Printf("wrote %s (%s)\n", ociPath, digest)
	}
	if push != "" {
		ref, err := name.ParseReference(push)
		if err != nil {
			return err
		}
		if err := remote.Write(ref, img, remoteOpts...); err != nil {
			return err
		}
		fmt.Printf("pushed %s@%s\n", ref.Context(), digest)
	}
	return nil
}
