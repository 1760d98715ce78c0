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
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/rukpak-dev/rukpak/internal/scratchimage"
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
	if o.Created.IsZero() {
		o.Created = time.Unix(0, 0)
	}
	files, err := rootfs(o)
	if err != nil {
		return nil, err
	}
	created := o.Created.UTC()
	return scratchimage.Build(scratchimage.Spec{
		Files:   files,
		Created: created,
		OS:      o.OS,
		Arch:    o.Arch,
		Gzip:    !o.Uncompressed,
		History: v1.History{
			CreatedBy: "hack/image: " + strings.Join(Binaries, ", ") + ", passwd, group, tmp, CA certificates",
			Comment:   "rukpak",
		},
		Config: v1.Config{
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
		},
	})
}

// rootfs lists the layer's files: the nonroot user, /tmp, the CA bundle
// and the binaries.
func rootfs(o Options) ([]scratchimage.File, error) {
	files := append(scratchimage.Accounts("nonroot", NonRoot, NonRoot, "/home/nonroot"),
		scratchimage.File{Name: "home", Dir: true, Mode: 0o755},
		scratchimage.File{Name: "home/nonroot", Dir: true, Mode: 0o700, UID: NonRoot, GID: NonRoot},
		scratchimage.File{Name: "tmp", Dir: true, Mode: 0o1777},
	)
	if o.CACerts != "" {
		data, err := os.ReadFile(o.CACerts)
		switch {
		case errors.Is(err, os.ErrNotExist):
			fmt.Fprintf(os.Stderr, "image: %s not found; the image has no CA certificates\n", o.CACerts)
		case err != nil:
			return nil, fmt.Errorf("reading the CA bundle: %w", err)
		default:
			files = append(files,
				scratchimage.File{Name: "etc/ssl", Dir: true, Mode: 0o755},
				scratchimage.File{Name: "etc/ssl/certs", Dir: true, Mode: 0o755},
				scratchimage.File{Name: "etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Data: data})
		}
	}
	for _, b := range Binaries {
		data, err := readBinary(filepath.Join(o.BinDir, b))
		if err != nil {
			return nil, err
		}
		files = append(files, scratchimage.File{Name: b, Mode: 0o755, Data: data})
	}
	return files, nil
}

// readBinary reads a binary and refuses dynamically linked ELF files, which
// could not run on a scratch base. (Data that is no ELF file at all passes:
// the tests stand in small files for the binaries.)
func readBinary(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w (run: CGO_ENABLED=0 go build -o bin/ ./cmd/...)", err)
	}
	if err := scratchimage.CheckStatic(data); err != nil && !errors.Is(err, scratchimage.ErrNotELF) {
		return nil, fmt.Errorf("%s: %w", path, err)
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
