package storage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/rukpak-dev/rukpak/unpack"
)

// nested is content with files at several depths, an empty directory and a
// name long enough to need more than a plain ustar header.
func nested() fstest.MapFS {
	long := strings.Repeat("d", 120) + "/" + strings.Repeat("f", 120) + ".yaml"
	return fstest.MapFS{
		"manifests/a.yaml":         {Data: []byte("kind: A\n")},
		"manifests/b.json":         {Data: []byte(`{"kind":"B"}`)},
		"metadata/annotations.yml": {Data: []byte("annotations: {}\n")},
		"deep/er/still/x.txt":      {Data: []byte("x")},
		"empty":                    {Mode: fs.ModeDir | 0o700},
		"zero-length":              {Data: nil},
		long:                       {Data: []byte("long")},
	}
}

func archive(t *testing.T, fsys fs.FS) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteArchive(context.Background(), &buf, fsys); err != nil {
		t.Fatalf("WriteArchive: %v", err)
	}
	return buf.Bytes()
}

// assertSameContent fails unless got, loaded content, holds exactly the
// files and directories of want that installs read (InstallContent), byte
// for byte.
func assertSameContent(t *testing.T, want, got fs.FS) {
	t.Helper()
	assertSameFiles(t, want, got, InstallContent)
}

// assertSameFiles fails unless got holds exactly the files and directories
// of want that keep selects, byte for byte.
func assertSameFiles(t *testing.T, want, got fs.FS, keep func(string) bool) {
	t.Helper()
	collect := func(fsys fs.FS) map[string]string {
		out := map[string]string{}
		err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if name != "." && !keep(name) {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if d.IsDir() {
				out[name] = "<dir>"
				return nil
			}
			b, err := fs.ReadFile(fsys, name)
			out[name] = string(b)
			return err
		})
		if err != nil {
			t.Fatalf("walking content: %v", err)
		}
		return out
	}
	w, g := collect(want), collect(got)
	for name, data := range w {
		if g[name] != data {
			t.Errorf("%s: got %q, want %q", name, g[name], data)
		}
	}
	for name := range g {
		if _, ok := w[name]; !ok {
			t.Errorf("unexpected entry %s", name)
		}
	}
}

func keepAll(string) bool { return true }

func TestArchiveRoundTrip(t *testing.T) {
	src := nested()
	got, err := ArchiveReader{Keep: keepAll}.Read(bytes.NewReader(archive(t, src)))
	if err != nil {
		t.Fatalf("ReadArchive: %v", err)
	}
	assertSameFiles(t, src, got, keepAll)
	if err := fstest.TestFS(got, "manifests/a.yaml", "deep/er/still/x.txt"); err != nil {
		t.Errorf("loaded content is not a well-behaved fs.FS: %v", err)
	}
}

func TestArchiveIsDeterministic(t *testing.T) {
	// The same content on disk twice, with different modes, mtimes and
	// creation order, must give the same bytes.
	write := func(dir string, order []string, mode os.FileMode, mtime time.Time) {
		for _, name := range order {
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("content of "+name), mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(p, mtime, mtime); err != nil {
				t.Fatal(err)
			}
		}
	}
	names := []string{"manifests/b.yaml", "manifests/a.yaml", "z/y/x.txt", "a.txt"}
	reversed := []string{"a.txt", "z/y/x.txt", "manifests/a.yaml", "manifests/b.yaml"}
	d1, d2 := t.TempDir(), t.TempDir()
	write(d1, names, 0o600, time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	write(d2, reversed, 0o755, time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))

	a1, a2 := archive(t, os.DirFS(d1)), archive(t, os.DirFS(d2))
	if !bytes.Equal(a1, a2) {
		t.Fatalf("same content gave different archives (%d and %d bytes)", len(a1), len(a2))
	}

	// And the entries are normalised as documented.
	gz, err := gzip.NewReader(bytes.NewReader(a1))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var order []string
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		order = append(order, hdr.Name)
		wantMode := int64(0o644)
		if hdr.Typeflag == tar.TypeDir {
			wantMode = 0o755
		}
		if hdr.Mode != wantMode || hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.Gname != "" || !hdr.ModTime.Equal(archiveModTime) {
			t.Errorf("entry %s not normalised: mode %o uid %d gid %d uname %q gname %q mtime %v",
				hdr.Name, hdr.Mode, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname, hdr.ModTime)
		}
	}
	want := []string{"a.txt", "manifests/", "manifests/a.yaml", "manifests/b.yaml", "z/", "z/y/", "z/y/x.txt"}
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Errorf("entry order %v, want %v", order, want)
	}
}

func TestWriteArchiveRejectsSymlinks(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")); err != nil {
		t.Fatal(err)
	}
	err := WriteArchive(context.Background(), &bytes.Buffer{}, os.DirFS(dir))
	if err == nil || !strings.Contains(err.Error(), `"passwd" is not a regular file or directory`) {
		t.Fatalf("got %v, want an error naming the symlink", err)
	}
}

func TestWriteArchiveStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := WriteArchive(ctx, &bytes.Buffer{}, nested()); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

type entry struct {
	name     string
	typeflag byte
	data     string
	linkname string
}

func rawArchive(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typeflag, Mode: 0o644, Size: int64(len(e.data)), Linkname: e.linkname}
		if e.typeflag != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.data)); err != nil && e.typeflag == tar.TypeReg {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadArchiveRejectsBadContent(t *testing.T) {
	file := func(name, data string) entry { return entry{name: name, typeflag: tar.TypeReg, data: data} }
	tests := []struct {
		name    string
		archive []byte
		limits  unpack.Limits
		wantErr string
	}{
		{name: "not gzip", archive: []byte("plain text"), wantErr: "reading gzip"},
		{name: "parent traversal", archive: rawArchive(t, file("../x", "x")), wantErr: `path "../x" escapes the bundle root`},
		{name: "nested traversal", archive: rawArchive(t, file("a/../../x", "x")), wantErr: "escapes the bundle root"},
		{name: "absolute path", archive: rawArchive(t, file("/etc/passwd", "x")), wantErr: `path "/etc/passwd" is absolute`},
		{name: "symlink", archive: rawArchive(t, entry{name: "passwd", typeflag: tar.TypeSymlink, linkname: "/etc/passwd"}), wantErr: `"passwd" is not a regular file or directory`},
		{name: "symlink outside install content", archive: rawArchive(t, entry{name: "docs/passwd", typeflag: tar.TypeSymlink, linkname: "/etc/passwd"}), wantErr: `"docs/passwd" is not a regular file or directory`},
		{name: "traversal outside install content", archive: rawArchive(t, file("docs/../../x", "x")), wantErr: "escapes the bundle root"},
		{name: "duplicate", archive: rawArchive(t, file("manifests/a", "1"), file("manifests/a", "2")), wantErr: `"manifests/a" appears more than once`},
		{name: "file below a file", archive: rawArchive(t, file("manifests/a", "1"), file("manifests/a/b", "2")), wantErr: `"manifests/a/b" is inside "manifests/a", which is a file`},
		{name: "file over a directory", archive: rawArchive(t, file("manifests/a/b", "1"), file("manifests/a", "2")), wantErr: `"manifests/a" is both a file and a directory`},
		{name: "manifests dir is a file", archive: rawArchive(t, file("manifests", "1"), file("manifests/a", "2")), wantErr: `"manifests/a" is inside "manifests", which is a file`},
		{name: "too large outside install content", archive: rawArchive(t, file("docs/a", "12345"), file("docs/b", "67890")), limits: unpack.Limits{MaxBytes: 9}, wantErr: "content is larger than 9 bytes"},
		{name: "too large", archive: rawArchive(t, file("a", "12345"), file("b", "67890")), limits: unpack.Limits{MaxBytes: 9}, wantErr: "content is larger than 9 bytes"},
		{name: "too many files", archive: rawArchive(t, file("a", ""), file("b", ""), file("c", "")), limits: unpack.Limits{MaxFiles: 2}, wantErr: "more than 2 files and directories"},
		{name: "truncated", archive: rawArchive(t, file("a", "data"))[:30], wantErr: "reading tar"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadArchive(bytes.NewReader(tt.archive), tt.limits)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestReadArchiveAtExactLimits(t *testing.T) {
	a := rawArchive(t, entry{name: "a", typeflag: tar.TypeReg, data: "12345"}, entry{name: "b", typeflag: tar.TypeReg, data: "6789"})
	if _, err := ReadArchive(bytes.NewReader(a), unpack.Limits{MaxBytes: 9, MaxFiles: 2}); err != nil {
		t.Fatalf("content exactly at the limits was rejected: %v", err)
	}
}

// Loading keeps only what installs read, so a bundle's other files (docs,
// tests, a large blob) cost no memory, and what is kept is bounded.
func TestArchiveReaderKeepsInstallContent(t *testing.T) {
	src := fstest.MapFS{
		"manifests/a.yaml":                        {Data: []byte("kind: A\n")},
		"registry+v1/manifests/csv.yaml":          {Data: []byte("kind: ClusterServiceVersion\n")},
		"registry+v1/metadata/annotations.yaml":   {Data: []byte("annotations: {}\n")},
		"registry+v1/tests/scorecard/config.yaml": {Data: []byte("big\n")},
		"registry+v1/README.md":                   {Data: []byte("readme")},
		"blob.bin":                                {Data: bytes.Repeat([]byte{0}, 1<<20)},
		"manifestsx/not-manifests.yaml":           {Data: []byte("x")},
		"docs/manifests/also-not.yaml":            {Data: []byte("x")},
	}
	got, err := ReadArchive(bytes.NewReader(archive(t, src)), unpack.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	if err := fs.WalkDir(got, ".", func(name string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, name)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want := "manifests/a.yaml registry+v1/manifests/csv.yaml registry+v1/metadata/annotations.yaml"
	if strings.Join(names, " ") != want {
		t.Fatalf("kept %v, want %s", names, want)
	}

	// The bound applies to what is kept; skipped bytes only count against
	// the archive's total.
	_, err = ArchiveReader{MaxKeptBytes: 20}.Read(bytes.NewReader(archive(t, src)))
	if want := "reading tar: the files installs read are larger than 20 bytes together"; err == nil || err.Error() != want {
		t.Fatalf("got error %v, want %q", err, want)
	}
	if _, err := (ArchiveReader{MaxKeptBytes: 1 << 10}).Read(bytes.NewReader(archive(t, src))); err != nil {
		t.Fatalf("a 1 MiB file outside install content counted against the kept bytes: %v", err)
	}

	// A manifest over the bound is refused from its header, before it is
	// read: nothing near its size is allocated.
	big := archive(t, fstest.MapFS{"manifests/big.yaml": {Data: make([]byte, 100<<20)}})
	allocated := allocatedBy(func() {
		_, err = ReadArchive(bytes.NewReader(big), unpack.Limits{})
	})
	if want := "reading tar: the files installs read are larger than 67108864 bytes together"; err == nil || err.Error() != want {
		t.Fatalf("got error %v, want %q", err, want)
	}
	if allocated > 8<<20 {
		t.Errorf("refusing a 100 MiB manifest allocated %d MiB, want < 8 MiB", allocated>>20)
	}
}

// A bundle with 64 MiB of files outside what installs read loads in a few
// MiB: before, Load held every file.
func TestLoadHoldsOnlyInstallContent(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 64 MiB archive")
	}
	ctx := context.Background()
	s := &LocalDirectory{RootDirectory: t.TempDir()}
	src := fstest.MapFS{
		"manifests/a.yaml": {Data: []byte("kind: A\n")},
		"tests/blob.bin":   {Data: bytes.Repeat([]byte("0123456789abcdef"), 4<<20)}, // 64 MiB
	}
	if err := s.Store(ctx, bundle("big"), src); err != nil {
		t.Fatal(err)
	}
	var got fs.FS
	allocated := allocatedBy(func() {
		var err error
		if got, err = s.Load(ctx, bundle("big")); err != nil {
			t.Fatal(err)
		}
	})
	if allocated > 8<<20 {
		t.Errorf("Load allocated %d MiB, want < 8 MiB", allocated>>20)
	}
	if _, err := fs.Stat(got, "tests/blob.bin"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat(tests/blob.bin) = %v, want not found", err)
	}
}

// allocatedBy is how many bytes f allocates on the heap.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
