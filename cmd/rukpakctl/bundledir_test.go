package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func cmYAML(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\n"
}

// TestRenderDirLinks: a directory renders as the provisioner would unpack
// an image built from it, whatever links it holds.
func TestRenderDirLinks(t *testing.T) {
	type setup func(t *testing.T, root, bundle string)
	write := func(rel, body string) setup {
		return func(t *testing.T, root, _ string) {
			p := filepath.Join(root, rel)
			must(t, os.MkdirAll(filepath.Dir(p), 0o755))
			must(t, os.WriteFile(p, []byte(body), 0o644))
		}
	}
	symlink := func(target, rel string) setup {
		return func(t *testing.T, _, bundle string) { must(t, os.Symlink(target, filepath.Join(bundle, rel))) }
	}
	hardlink := func(from, rel string) setup {
		return func(t *testing.T, root, bundle string) {
			must(t, os.Link(filepath.Join(root, from), filepath.Join(bundle, rel)))
		}
	}
	// Every case has bundle/manifests/cm.yaml (ConfigMap "inside") and a
	// ConfigMap "outside" in outside/cm.yaml, next to the bundle.
	cases := []struct {
		name    string
		setup   []setup
		want    []string
		wantErr string
	}{
		{"plain", nil, []string{"ConfigMap /inside"}, ""},
		{"absolute symlink", []setup{symlink("/etc/passwd", "manifests/passwd.yaml")}, nil,
			`symlink "manifests/passwd.yaml" points outside the bundle root ("/etc/passwd")`},
		{"relative symlink climbing out", []setup{symlink("../../outside/cm.yaml", "manifests/out.yaml")}, nil,
			`symlink "manifests/out.yaml" points outside the bundle root ("../../outside/cm.yaml")`},
		{"symlinked directory outside", []setup{symlink("../outside", "metadata")}, nil,
			`symlink "metadata" points outside the bundle root ("../outside")`},
		// The provisioner does not materialise links: a symlink inside the
		// bundle adds nothing (following it would render "inside" twice).
		{"symlink inside", []setup{symlink("cm.yaml", "manifests/alias.yaml")}, []string{"ConfigMap /inside"}, ""},
		{"symlinked manifests directory inside", []setup{write("bundle/real/cm2.yaml", cmYAML("real")), symlink("cm.yaml", "manifests/alias.yaml"), symlink("real", "more")},
			[]string{"ConfigMap /inside"}, ""},
		// A hard-linked file is a file: its content is in the bundle.
		{"hardlink to a file outside", []setup{hardlink("outside/cm.yaml", "manifests/hard.yaml")}, []string{"ConfigMap /inside", "ConfigMap /outside"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			bundle := filepath.Join(root, "bundle")
			write("bundle/manifests/cm.yaml", cmYAML("inside"))(t, root, bundle)
			write("outside/cm.yaml", cmYAML("outside"))(t, root, bundle)
			for _, s := range tc.setup {
				s(t, root, bundle)
			}
			out, err := render(t, bundle)
			checkRender(t, out, err, tc.want, tc.wantErr)
		})
	}
}

func checkRender(t *testing.T, out string, err error, want []string, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || err.Error() != wantErr {
			t.Fatalf("got error %v, want %q", err, wantErr)
		}
		if out != "" {
			t.Fatalf("printed objects for a refused bundle:\n%s", out)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := docs(t, out); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("rendered %q, want %q", got, want)
	}
}

// TestRenderDirSpecialFiles: a FIFO in a bundle is skipped as the
// provisioner skips it, instead of blocking the render on reading it.
func TestRenderDirSpecialFiles(t *testing.T) {
	bundle := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(bundle, "manifests"), 0o755))
	must(t, os.WriteFile(filepath.Join(bundle, "manifests", "cm.yaml"), []byte(cmYAML("inside")), 0o644))
	if err := syscall.Mkfifo(filepath.Join(bundle, "manifests", "pipe.yaml"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	out, err := render(t, bundle)
	checkRender(t, out, err, []string{"ConfigMap /inside"}, "")
}

// TestRenderDirLimits: the provisioner's limit flags apply to a directory.
func TestRenderDirLimits(t *testing.T) {
	bundle := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(bundle, "manifests"), 0o755))
	must(t, os.WriteFile(filepath.Join(bundle, "manifests", "cm.yaml"), []byte(cmYAML("inside")), 0o644))
	out, err := render(t, bundle, "--max-file-bytes", "10")
	checkRender(t, out, err, nil, "file manifests/cm.yaml is larger than the limit of 10 bytes")
	out, err = render(t, bundle, "--max-bundle-files", "1")
	checkRender(t, out, err, nil, "bundle has more than 1 files and directories")
}

type tarEntry struct {
	name, body, link string
	typeflag         byte
}

func ociLayout(t *testing.T, layers ...[]tarEntry) string {
	t.Helper()
	img := empty.Image
	for _, entries := range layers {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, e := range entries {
			hdr := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: e.typeflag, Linkname: e.link}
			if e.typeflag == 0 {
				hdr.Typeflag = tar.TypeReg
			} else {
				hdr.Size = 0
			}
			must(t, tw.WriteHeader(hdr))
			_, err := tw.Write([]byte(e.body))
			must(t, err)
		}
		must(t, tw.Close())
		data := buf.Bytes()
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
		must(t, err)
		img, err = mutate.AppendLayers(img, layer)
		must(t, err)
	}
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	must(t, err)
	must(t, p.AppendImage(img))
	return dir
}

// TestRenderOCILayoutLinks: an OCI layout goes through the provisioner's
// layer extraction: hardlinks are copies of their target, symlinks leaving
// the bundle are refused, whiteouts apply.
func TestRenderOCILayoutLinks(t *testing.T) {
	cases := []struct {
		name    string
		layers  [][]tarEntry
		want    []string
		wantErr string
	}{
		{"hardlink is a copy of its target", [][]tarEntry{{
			{name: "src/cm.yaml", body: cmYAML("linked")},
			{name: "manifests/cm.yaml", typeflag: tar.TypeLink, link: "src/cm.yaml"},
		}}, []string{"ConfigMap /linked"}, ""},
		{"symlink out of the bundle", [][]tarEntry{{
			{name: "manifests/cm.yaml", body: cmYAML("a")},
			{name: "manifests/passwd", typeflag: tar.TypeSymlink, link: "/etc/passwd"},
		}}, nil, `layer 0: symlink "manifests/passwd" points outside the bundle root ("/etc/passwd")`},
		{"whiteout in a later layer", [][]tarEntry{
			{{name: "manifests/a.yaml", body: cmYAML("a")}, {name: "manifests/b.yaml", body: cmYAML("b")}},
			{{name: "manifests/.wh.a.yaml"}},
		}, []string{"ConfigMap /b"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := render(t, ociLayout(t, tc.layers...))
			checkRender(t, out, err, tc.want, tc.wantErr)
		})
	}
}

// Temporary trees are removed when render returns.
func TestRenderLeavesNothing(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	bundle := filepath.Join(t.TempDir(), "b")
	must(t, os.MkdirAll(filepath.Join(bundle, "manifests"), 0o755))
	must(t, os.WriteFile(filepath.Join(bundle, "manifests", "cm.yaml"), []byte(cmYAML("x")), 0o644))
	if _, err := render(t, bundle); err != nil {
		t.Fatal(err)
	}
	must(t, os.Symlink("/etc/passwd", filepath.Join(bundle, "manifests", "p")))
	if _, err := render(t, bundle); err == nil {
		t.Fatal("want an error")
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Fatalf("left %v in TMPDIR", left)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
