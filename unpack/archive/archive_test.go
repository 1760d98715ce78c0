package archive_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/archive"
)

// entry is one tar member; a zero Typeflag means a regular file.
type entry struct {
	name     string
	body     string
	typeflag byte
	link     string
	mode     int64
}

func file(name, body string) entry { return entry{name: name, body: body} }
func dir(name string) entry        { return entry{name: name, typeflag: tar.TypeDir} }

func tarball(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typeflag, Linkname: e.link, Mode: e.mode}
		if hdr.Typeflag == 0 {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.body))
		}
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// listing is every path under root with file contents, sorted.
// listing is every entry of fsys: "dir/", "file=content", or "name?type"
// for anything else.
func listing(t *testing.T, fsys fs.FS) []string {
	t.Helper()
	var out []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		switch {
		case d.IsDir():
			out = append(out, p+"/")
		case d.Type().IsRegular():
			b, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			out = append(out, p+"="+string(b))
		default:
			out = append(out, p+"?"+d.Type().String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func spooled(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newTree(t *testing.T, dir string, limits unpack.Limits) *unpack.Tree {
	t.Helper()
	tree, err := unpack.NewTree(dir, limits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tree.Close() })
	return tree
}

func TestExtract(t *testing.T) {
	plain := tarball(t,
		dir("./"), dir("./manifests/"), file("./manifests/a.yaml", "a"),
		entry{name: "bin/run", body: "#!", mode: 0o755},
		entry{name: "inside", typeflag: tar.TypeSymlink, link: "manifests/a.yaml"},
		entry{name: "manifests/copy.yaml", typeflag: tar.TypeLink, link: "manifests/a.yaml"},
		entry{name: "dev", typeflag: tar.TypeChar},
		entry{name: "fifo", typeflag: tar.TypeFifo},
		file("keep/.wh.x", "not a whiteout here"),
	)
	want := []string{"bin/", "bin/run=#!", "keep/", "keep/.wh.x=not a whiteout here", "manifests/", "manifests/a.yaml=a", "manifests/copy.yaml=a"}

	for _, tc := range []struct {
		name string
		data []byte
		opts archive.Options
	}{
		{"tar", plain, archive.Options{}},
		{"tar.gz detected", gzipped(t, plain), archive.Options{}},
		{"tar.gz required", gzipped(t, plain), archive.Options{RequireGzip: true}},
		{"tar.zst", zstdStream(t, plain), archive.Options{}},
		{"tar.zst in raw blocks", zstdRaw(window1MiB, plain), archive.Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree := newTree(t, t.TempDir(), unpack.Limits{})
			if err := archive.Extract(t.Context(), bytes.NewReader(tc.data), tree, tc.opts); err != nil {
				t.Fatal(err)
			}
			if got := listing(t, tree.FS()); !slices.Equal(got, want) {
				t.Fatalf("got %q, want %q", got, want)
			}
			info, err := fs.Stat(tree.FS(), "bin/run")
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode().Perm()&0o111 == 0 {
				t.Errorf("bin/run lost its executable bit: %v", info.Mode())
			}
		})
	}
}

// longNameTar is an archive of one file whose name, in a PAX record, is
// longer than archive/tar.Writer allows: hostile archives are not written
// by it.
func longNameTar(t *testing.T, name string) []byte {
	t.Helper()
	rec := " path=" + name + "\n"
	for n := len(rec) + 1; ; n++ { // the record's length counts its own digits
		if l := fmt.Sprintf("%d%s", n, rec); len(l) == n {
			rec = l
			break
		}
	}
	data := tarball(t, file("pax", rec), file("placeholder", "x"))
	hdr := data[:512]
	hdr[156] = tar.TypeXHeader
	copy(hdr[148:156], "        ")
	var sum int
	for _, b := range hdr {
		sum += int(b)
	}
	copy(hdr[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return data
}

// zstdRaw is a zstd frame of data in raw (stored) blocks whose header
// declares the window windowDescriptor encodes (RFC 8878 3.1.1.1.2): what a
// hostile encoder writes to make a decoder allocate, with no work of its
// own.
func zstdRaw(windowDescriptor byte, data []byte) []byte {
	out := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, windowDescriptor}
	for {
		n := min(len(data), 64<<10)
		last := n == len(data)
		h := uint32(n) << 3 // raw block
		if last {
			h |= 1
		}
		out = append(out, byte(h), byte(h>>8), byte(h>>16))
		out = append(out, data[:n]...)
		data = data[n:]
		if last {
			return out
		}
	}
}

// Window descriptors: exponent<<3 | mantissa, window = 2^(10+exponent) * (1 + mantissa/8).
const (
	window1MiB   = 10 << 3
	window512MiB = 19 << 3
	window5GiB   = 22<<3 | 2
)

func zstdStream(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf, zstd.WithWindowSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestExtractRejects(t *testing.T) {
	zeros := make([]byte, 4<<20)
	deep := strings.Repeat("a/", 63_999) + "a" // 64,000 levels, 127,999 bytes
	for _, tc := range []struct {
		name    string
		data    []byte
		limits  unpack.Limits
		opts    archive.Options
		wantErr string
	}{{
		name:    "parent path",
		data:    tarball(t, file("ok", "x"), file("../x", "evil")),
		wantErr: `path "../x" escapes the bundle root`,
	}, {
		name:    "nested parent path",
		data:    tarball(t, file("a/../../x", "evil")),
		wantErr: `path "a/../../x" escapes the bundle root`,
	}, {
		name:    "absolute path",
		data:    tarball(t, file("/etc/cron.d/x", "evil")),
		wantErr: `path "/etc/cron.d/x" is absolute`,
	}, {
		name:    "symlink to /etc/passwd",
		data:    tarball(t, entry{name: "manifests/passwd", typeflag: tar.TypeSymlink, link: "/etc/passwd"}),
		wantErr: `symlink "manifests/passwd" points outside the bundle root ("/etc/passwd")`,
	}, {
		name:    "relative symlink out",
		data:    tarball(t, entry{name: "manifests/passwd", typeflag: tar.TypeSymlink, link: "../../etc/passwd"}),
		wantErr: `symlink "manifests/passwd" points outside the bundle root ("../../etc/passwd")`,
	}, {
		name:    "hardlink to /etc/passwd",
		data:    tarball(t, entry{name: "passwd", typeflag: tar.TypeLink, link: "/etc/passwd"}),
		wantErr: `hardlink "passwd" points outside the bundle root ("/etc/passwd")`,
	}, {
		name:    "hardlink to missing file",
		data:    tarball(t, entry{name: "a", typeflag: tar.TypeLink, link: "b"}),
		wantErr: `hardlink "a": target "b" is not in the archive before it`,
	}, {
		name:    "decompression bomb",
		data:    gzipped(t, tarball(t, file("manifests/bomb.yaml", string(zeros)))),
		limits:  unpack.Limits{MaxBytes: 1 << 20},
		wantErr: "bundle content exceeds the limit of 1048576 bytes (at manifests/bomb.yaml)",
	}, {
		name:    "too many files",
		data:    tarball(t, file("a", ""), file("b", ""), file("c", "")),
		limits:  unpack.Limits{MaxFiles: 2},
		wantErr: "bundle has more than 2 files and directories",
	}, {
		// Entries that write nothing still count: an archive of nothing
		// but links, devices or whiteouts cannot run on for ever.
		name: "too many entries kept out",
		data: tarball(t, entry{name: "l1", typeflag: tar.TypeSymlink, link: "x"}, entry{name: "l2", typeflag: tar.TypeSymlink, link: "x"},
			entry{name: "d", typeflag: tar.TypeChar}),
		limits:  unpack.Limits{MaxFiles: 2},
		wantErr: "bundle has more than 2 files and directories",
	}, {
		name:    "too many whiteouts",
		data:    tarball(t, file(".wh.a", ""), file(".wh.b", ""), file(".wh.c", "")),
		opts:    archive.Options{Whiteouts: true},
		limits:  unpack.Limits{MaxFiles: 2},
		wantErr: "bundle has more than 2 files and directories",
	}, {
		name:    "too many opaque markers",
		data:    tarball(t, file("a/.wh..wh..opq", ""), file("a/.wh..wh..opq", ""), file("a/b/.wh..wh..opq", "")),
		opts:    archive.Options{Whiteouts: true},
		limits:  unpack.Limits{MaxFiles: 2},
		wantErr: "bundle has more than 2 files and directories",
	}, {
		name:    "not gzip",
		data:    tarball(t, file("a", "")),
		opts:    archive.Options{RequireGzip: true},
		wantErr: "not a gzip archive",
	}, {
		name:    "truncated",
		data:    tarball(t, file("a", strings.Repeat("x", 4096)))[:1024],
		wantErr: `reading archive: entry "a": unexpected EOF`,
	}, {
		name:    "a 64,000-level name",
		data:    gzipped(t, tarball(t, file(deep, "x"))),
		wantErr: `archive entry: path "` + deep[:100] + `..." is 127999 bytes long, more than the limit of 1024`,
	}, {
		name:    "a 64,000-level name in a hand-made PAX record",
		data:    longNameTar(t, deep),
		wantErr: `archive entry: path "` + deep[:100] + `..." is 127999 bytes long, more than the limit of 1024`,
	}, {
		// archive/tar refuses a name record over 1 MiB itself.
		name:    "a 640,000-level name",
		data:    gzipped(t, longNameTar(t, strings.Repeat("a/", 639_999)+"a")),
		wantErr: "reading archive: archive/tar: header field too long",
	}, {
		name:    "a name one level too deep",
		data:    tarball(t, dir(strings.Repeat("d/", 64)+"x/")),
		wantErr: `archive entry: path "` + strings.Repeat("d/", 50) + `..." is 65 levels deep, more than the limit of 64`,
	}, {
		name:    "a deep whiteout",
		data:    tarball(t, file(strings.Repeat("d/", 3)+".wh.x", "")),
		opts:    archive.Options{Whiteouts: true},
		limits:  unpack.Limits{MaxPathDepth: 3},
		wantErr: `archive entry: path "d/d/d/.wh.x" is 4 levels deep, more than the limit of 3`,
	}, {
		name:    "a long symlink target",
		data:    tarball(t, entry{name: "l", typeflag: tar.TypeSymlink, link: strings.Repeat("a/", 1000)}),
		wantErr: `archive entry "l": link target is 2000 bytes long, more than the limit of 1024`,
	}, {
		name:    "a long hardlink target",
		data:    tarball(t, entry{name: "l", typeflag: tar.TypeLink, link: deep}),
		wantErr: `archive entry "l": link target is 127999 bytes long, more than the limit of 1024`,
	}, {
		name:    "implied parent directories count as files",
		data:    tarball(t, file("a/b/c/d", "x")),
		limits:  unpack.Limits{MaxFiles: 3},
		wantErr: "bundle has more than 3 files and directories",
	}, {
		name:    "a file where a directory is needed",
		data:    tarball(t, file("top", "x"), file("top/x", "y")),
		wantErr: `cannot create "top/x": "top" is a file, not a directory`,
	}, {
		name:    "a file over the file size limit",
		data:    gzipped(t, tarball(t, file("manifests/big.yaml", string(zeros)))),
		limits:  unpack.Limits{MaxFileBytes: 1 << 20},
		wantErr: "file manifests/big.yaml is larger than the limit of 1048576 bytes",
	}, {
		name:    "zstd declaring a 512 MiB window",
		data:    zstdRaw(window512MiB, tarball(t, file("a", "x"))),
		wantErr: "reading zstd archive: it needs a decompression window of more than 16777216 bytes (the limit)",
	}, {
		name:    "zstd corrupt",
		data:    append(zstdRaw(window1MiB, tarball(t, file("a", "x")))[:6], 0xff, 0xff, 0xff),
		wantErr: "reading zstd archive: ",
	}, {
		// A deflate block of the reserved type right after the gzip header.
		name:    "gzip corrupt",
		data:    corruptDeflate(gzipped(t, tarball(t, file("a", strings.Repeat("x", 4096))))),
		wantErr: "reading archive: flate: corrupt input",
	}, {
		name:    "whiteout escaping",
		data:    tarball(t, file("../.wh.etc", "")),
		opts:    archive.Options{Whiteouts: true},
		wantErr: `path "../.wh.etc" escapes the bundle root`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			root := filepath.Join(parent, "root")
			if err := os.Mkdir(root, 0o755); err != nil {
				t.Fatal(err)
			}
			tree := newTree(t, root, tc.limits)
			err := archive.Extract(t.Context(), bytes.NewReader(tc.data), tree, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
			}
			if !unpack.IsTerminal(err) {
				t.Errorf("error %v is not terminal", err)
			}
			// Nothing lands outside the root, and no link is ever created.
			if got := listing(t, os.DirFS(parent)); !slices.Equal(got, []string{"root/", "root/data=" + spooled(t, root)}) {
				t.Errorf("files on disk: %q, want only the tree's spool", got)
			}
			for _, p := range listing(t, tree.FS()) {
				if strings.Contains(p, "?") {
					t.Errorf("materialised a non-regular file: %s", p)
				}
			}
		})
	}
}

func TestExtractWhiteouts(t *testing.T) {
	layers := [][]byte{
		tarball(t,
			dir("a/"), file("a/x", "1"), file("a/y", "1"),
			dir("b/"), file("b/z", "1"),
			dir("c/"), file("c/old", "1"), dir("c/sub/"), file("c/sub/old", "1"),
			file("d", "file in layer 1"),
		),
		tarball(t,
			file("a/.wh.x", ""),
			file(".wh.b", ""),
			// Written before the opaque marker of the same layer: kept.
			file("c/new", "2"), file("c/sub/new", "2"),
			file("c/.wh..wh..opq", ""),
			// A directory replaces a lower layer's file.
			dir("d/"), file("d/e", "2"),
		),
	}
	tree := newTree(t, t.TempDir(), unpack.Limits{})
	for _, l := range layers {
		if err := archive.Extract(t.Context(), bytes.NewReader(l), tree, archive.Options{Whiteouts: true}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"a/", "a/y=1", "c/", "c/new=2", "c/sub/", "c/sub/new=2", "d/", "d/e=2"}
	if got := listing(t, tree.FS()); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestExtractCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := archive.Extract(ctx, bytes.NewReader(tarball(t, file("a", ""))), newTree(t, t.TempDir(), unpack.Limits{}), archive.Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// Hostile archives are refused before they cost memory: a 64,000-level
// name took minutes and a 3.9 GiB index, a zstd frame declaring a 512 MiB
// window allocated it.
func TestExtractHostileCost(t *testing.T) {
	deep := strings.Repeat("a/", 63_999) + "a"
	for _, tc := range []struct {
		name, wantErr string
		data          []byte
	}{
		{
			name:    "64,000-level name",
			data:    gzipped(t, tarball(t, file(deep, "x"))),
			wantErr: `archive entry: path "` + deep[:100] + `..." is 127999 bytes long, more than the limit of 1024`,
		},
		{
			name:    "zstd declaring a 512 MiB window",
			data:    zstdRaw(window512MiB, tarball(t, file("a", "x"))),
			wantErr: "reading zstd archive: it needs a decompression window of more than 16777216 bytes (the limit)",
		},
		{
			name:    "zstd declaring a 5 GiB window",
			data:    zstdRaw(window5GiB, tarball(t, file("a", "x"))),
			wantErr: "reading zstd archive: it needs a decompression window of more than 16777216 bytes (the limit)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree := newTree(t, t.TempDir(), unpack.Limits{})
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := archive.Extract(t.Context(), bytes.NewReader(tc.data), tree, archive.Options{})
			runtime.ReadMemStats(&after)
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("error = %v, want %q", err, tc.wantErr)
			}
			if !unpack.IsTerminal(err) {
				t.Errorf("error %v is retryable", err)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
				t.Errorf("refusing it allocated %d MiB, want < 64 MiB", alloc>>20)
			}
		})
	}
}

// corruptDeflate makes the first deflate block of a gzip stream (whose
// header is 10 bytes: gzipped writes no name or extra fields) one of the
// reserved type.
func corruptDeflate(gz []byte) []byte {
	out := bytes.Clone(gz)
	out[10] = 0xff
	return out
}
