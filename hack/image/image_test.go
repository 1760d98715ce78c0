package main

import (
	"archive/tar"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/rukpak-dev/rukpak/internal/scratchimage"
)

// fakeInputs writes small stand-ins for the binaries and the CA bundle.
func fakeInputs(t *testing.T) Options {
	t.Helper()
	dir := t.TempDir()
	for _, b := range Binaries {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!fake "+b+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return Options{
		BinDir:   dir,
		CACerts:  ca,
		Source:   "https://github.com/rukpak-dev/rukpak",
		Version:  "v0.1.0-test",
		Revision: "0123456789abcdef0123456789abcdef01234567",
		Created:  time.Unix(1700000000, 0),
		Arch:     "amd64",
	}
}

type fileInfo struct {
	typ      byte
	mode     int64
	uid, gid int
	mtime    time.Time
	body     string
}

// files lists the image's flattened filesystem.
func files(t *testing.T, img v1.Image, oci bool) (map[string]fileInfo, []string) {
	t.Helper()
	if layers, err := img.Layers(); err == nil && len(layers) == 1 {
		if mt, err := layers[0].MediaType(); oci && (err != nil || mt != types.OCILayer) {
			t.Errorf("layer media type %q, %v", mt, err)
		}
	}
	entries, err := scratchimage.Contents(img)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]fileInfo{}
	var order []string
	for _, e := range entries {
		h := e.Header
		out[h.Name] = fileInfo{typ: h.Typeflag, mode: h.Mode, uid: h.Uid, gid: h.Gid, mtime: h.ModTime, body: string(e.Data)}
		order = append(order, h.Name)
	}
	return out, order
}

// checkImage asserts the image's content; oci is false for images read
// back from a docker tarball, which carries docker media types.
func checkImage(t *testing.T, img v1.Image, o Options, oci bool) {
	t.Helper()
	fs, order := files(t, img, oci)
	want := []string{
		"etc/", "etc/group", "etc/passwd", "etc/ssl/", "etc/ssl/certs/", "etc/ssl/certs/ca-certificates.crt",
		"home/", "home/nonroot/", "provisioner", "tmp/", "webhook",
	}
	if !reflect.DeepEqual(order, want) {
		t.Errorf("files:\n got %v\nwant %v", order, want)
	}
	modes := map[string]int64{"provisioner": 0o755, "webhook": 0o755, "tmp/": 0o1777, "etc/passwd": 0o644, "etc/group": 0o644, "etc/ssl/certs/ca-certificates.crt": 0o644, "home/nonroot/": 0o700}
	for f, m := range modes {
		if fs[f].mode != m {
			t.Errorf("%s: mode %o, want %o", f, fs[f].mode, m)
		}
	}
	for _, b := range Binaries {
		if fs[b].typ != tar.TypeReg || fs[b].body != "#!fake "+b+"\n" || fs[b].uid != 0 {
			t.Errorf("%s: %+v", b, fs[b])
		}
	}
	if fs["tmp/"].typ != tar.TypeDir {
		t.Errorf("tmp is not a directory: %+v", fs["tmp/"])
	}
	if h := fs["home/nonroot/"]; h.uid != NonRoot || h.gid != NonRoot {
		t.Errorf("home/nonroot owned by %d:%d", h.uid, h.gid)
	}
	if !strings.Contains(fs["etc/passwd"].body, "nonroot:x:65532:65532:") || !strings.Contains(fs["etc/group"].body, "nonroot:x:65532:") {
		t.Errorf("passwd/group lack nonroot:\n%s\n%s", fs["etc/passwd"].body, fs["etc/group"].body)
	}
	if !strings.Contains(fs["etc/ssl/certs/ca-certificates.crt"].body, "fake") {
		t.Errorf("CA bundle not copied")
	}
	for n, f := range fs {
		if !f.mtime.Equal(o.Created) {
			t.Errorf("%s: mtime %v", n, f.mtime)
		}
	}

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q", cf.Config.User)
	}
	if len(cf.Config.Entrypoint) != 0 || len(cf.Config.Cmd) != 0 {
		t.Errorf("entrypoint %v cmd %v, want unset", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Equal(o.Created) {
		t.Errorf("os %q arch %q created %v", cf.OS, cf.Architecture, cf.Created)
	}
	labels := map[string]string{
		"org.opencontainers.image.source":   o.Source,
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.created":  "2023-11-14T22:13:20Z",
	}
	for k, v := range labels {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
		}
	}
	if mt, err := img.MediaType(); oci && (err != nil || mt != types.OCIManifestSchema1) {
		t.Errorf("manifest media type %q, %v", mt, err)
	}
}

func TestBuildIsReproducible(t *testing.T) {
	o := fakeInputs(t)
	a, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("same inputs, different digests: %s, %s", da, db)
	}
	checkImage(t, a, o, true)

	// Any input change must show in the digest.
	o2 := o
	o2.Revision = "fedcba9876543210fedcba9876543210fedcba98"
	c, err := Build(o2)
	if err != nil {
		t.Fatal(err)
	}
	if dc, _ := c.Digest(); dc == da {
		t.Errorf("a different revision gave the same digest %s", dc)
	}
	if err := os.WriteFile(filepath.Join(o.BinDir, "webhook"), []byte("changed"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	if dd, _ := d.Digest(); dd == da {
		t.Errorf("a different binary gave the same digest %s", dd)
	}
}

// TestWrite pushes to an in-process registry and writes the tarball and the
// OCI layout, then reads each back.
func TestWrite(t *testing.T) {
	o := fakeInputs(t)
	img, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	pushRef := u.Host + "/rukpak:test"
	out := t.TempDir()
	tarPath, ociPath := filepath.Join(out, "bin", "rukpak-image.tar"), filepath.Join(out, "oci")
	if err := write(img, "rukpak:devel", tarPath, ociPath, pushRef); err != nil {
		t.Fatal(err)
	}
	// Twice: the layout keeps one entry per name.
	if err := write(img, "rukpak:devel", "", ociPath, ""); err != nil {
		t.Fatal(err)
	}

	t.Run("registry", func(t *testing.T) {
		ref, _ := name.ParseReference(pushRef)
		pulled, err := remote.Image(ref)
		if err != nil {
			t.Fatal(err)
		}
		if d, _ := pulled.Digest(); d != want {
			t.Errorf("pushed digest %s, built %s", d, want)
		}
		checkImage(t, pulled, o, true)
	})

	t.Run("tarball", func(t *testing.T) {
		tag, _ := name.NewTag("rukpak:devel")
		loaded, err := tarball.ImageFromPath(tarPath, &tag)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, loaded, o, false)
		// What docker load and kind load image-archive read.
		m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(tarPath) })
		if err != nil {
			t.Fatal(err)
		}
		if len(m) != 1 || !reflect.DeepEqual(m[0].RepoTags, []string{"rukpak:devel"}) {
			t.Errorf("manifest.json: %+v", m)
		}
		cfg, _ := img.ConfigName()
		if m[0].Config != "sha256:"+cfg.Hex {
			t.Errorf("config %s, want sha256:%s", m[0].Config, cfg.Hex)
		}
	})

	t.Run("oci layout", func(t *testing.T) {
		p, err := layout.FromPath(ociPath)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := p.ImageIndex()
		if err != nil {
			t.Fatal(err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(im.Manifests) != 1 || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "rukpak:devel" {
			raw, _ := json.Marshal(im)
			t.Fatalf("index.json: %s", raw)
		}
		got, err := p.Image(im.Manifests[0].Digest)
		if err != nil {
			t.Fatal(err)
		}
		if d, _ := got.Digest(); d != want {
			t.Errorf("layout digest %s, built %s", d, want)
		}
		checkImage(t, got, o, true)
	})
}

func TestMissingCACertsIsOptional(t *testing.T) {
	o := fakeInputs(t)
	o.CACerts = filepath.Join(t.TempDir(), "absent.crt")
	img, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	fs, _ := files(t, img, true)
	if _, ok := fs["etc/ssl/certs/ca-certificates.crt"]; ok {
		t.Error("CA bundle present although the source is missing")
	}
	if _, ok := fs["provisioner"]; !ok {
		t.Error("provisioner missing")
	}
}

func TestRejectsMissingAndDynamicBinaries(t *testing.T) {
	o := fakeInputs(t)
	if err := os.Remove(filepath.Join(o.BinDir, "webhook")); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(o); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0 go build") {
		t.Errorf("missing webhook: %v", err)
	}

	// A dynamically linked ELF binary (any from the build machine) cannot
	// run on scratch.
	dyn, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git binary to use as a dynamic executable")
	}
	data, err := os.ReadFile(dyn)
	if err != nil {
		t.Skip(err)
	}
	if err := os.WriteFile(filepath.Join(o.BinDir, "webhook"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(o); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("dynamic webhook: %v", err)
	}
}

func TestSourceDateEpoch(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	got, err := sourceDate()
	if err != nil || !got.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("got %v, %v", got, err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "")
	if got, _ := sourceDate(); !got.Equal(time.Unix(0, 0)) {
		t.Errorf("default %v", got)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if _, err := sourceDate(); err == nil {
		t.Error("bad SOURCE_DATE_EPOCH accepted")
	}
}

// TestUncompressedTarball: the local tarball's layer is a plain tar, the
// image ID (config digest) is the compressed image's, and it reads back
// with the same content.
func TestUncompressedTarball(t *testing.T) {
	o := fakeInputs(t)
	compressed, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	o.Uncompressed = true
	img, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := compressed.ConfigName()
	if got, err := img.ConfigName(); err != nil || got != want {
		t.Errorf("image ID %v (%v), compressed %v", got, err, want)
	}
	tarPath := filepath.Join(t.TempDir(), "rukpak-image.tar")
	if err := write(img, "rukpak:devel", tarPath, "", ""); err != nil {
		t.Fatal(err)
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(tarPath) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || len(m[0].Layers) != 1 || !strings.HasSuffix(m[0].Layers[0], ".tar") {
		t.Fatalf("manifest.json: %+v, want one plain-tar layer", m)
	}
	tag, _ := name.NewTag("rukpak:devel")
	loaded, err := tarball.ImageFromPath(tarPath, &tag)
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, loaded, o, false)
	f, err := os.Open(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no %s in the tarball: %v", m[0].Layers[0], err)
		}
		if h.Name != m[0].Layers[0] {
			continue
		}
		if _, err := tar.NewReader(tr).Next(); err != nil {
			t.Errorf("the layer as stored is no plain tar: %v", err)
		}
		return
	}
}
