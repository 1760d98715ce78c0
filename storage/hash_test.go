package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
)

// TestLoadHashed proves the hash names the bytes of the file stored or
// loaded, is answered by a stat while that file stays, and is forgotten
// once the archive is replaced by another writer or deleted.
func TestLoadHashed(t *testing.T) {
	ctx := context.Background()
	s := &LocalDirectory{RootDirectory: t.TempDir()}
	b := bundle("b")
	if _, ok := s.StoredHash(ctx, b); ok {
		t.Fatal("a hash before anything was stored")
	}
	content := func(v string) fstest.MapFS {
		return fstest.MapFS{"manifests/cm.yaml": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + v + "\n")}}
	}
	fileHash := func() [sha256.Size]byte {
		t.Helper()
		raw, err := os.ReadFile(filepath.Join(s.RootDirectory, "b.tgz"))
		if err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(raw)
	}
	if err := s.Store(ctx, b, content("one")); err != nil {
		t.Fatal(err)
	}
	// Hashed as it was written: installs find it without reading it.
	stored, ok := s.StoredHash(ctx, b)
	if !ok || stored != fileHash() {
		t.Fatalf("StoredHash after Store = %x, %v; want the SHA-256 of the archive file", stored, ok)
	}
	if d, err := s.Digest(ctx, b); err != nil || d != "sha256:"+hex.EncodeToString(stored[:]) {
		t.Fatalf("Digest = %q, %v; want the stored hash", d, err)
	}
	fsys, sum, ok, err := s.LoadHashed(ctx, b, nil)
	if err != nil || !ok {
		t.Fatalf("LoadHashed: %v, ok %v", err, ok)
	}
	if _, err := fsys.Open("manifests/cm.yaml"); err != nil {
		t.Fatalf("loaded content lacks its file: %v", err)
	}
	if sum != stored {
		t.Fatal("LoadHashed's hash is not the SHA-256 of the whole archive file")
	}
	if got, ok := s.StoredHash(ctx, b); !ok || got != sum {
		t.Fatalf("StoredHash = %x, %v; want the loaded hash", got, ok)
	}

	// Stored again: the new archive's hash.
	if err := s.Store(ctx, b, content("two")); err != nil {
		t.Fatal(err)
	}
	if got, ok := s.StoredHash(ctx, b); !ok || got == sum || got != fileHash() {
		t.Fatalf("StoredHash after a second Store = %x, %v; want the new archive's hash", got, ok)
	}

	// Replaced by another writer (another archive renamed over it): no
	// hash until it is read.
	other := &LocalDirectory{RootDirectory: t.TempDir()}
	if err := other.Store(ctx, b, content("three")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(other.RootDirectory, "b.tgz"), filepath.Join(s.RootDirectory, "b.tgz")); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.StoredHash(ctx, b); ok {
		t.Fatal("StoredHash answered for an archive replaced since it was hashed")
	}
	replaced := fileHash()
	if d, err := s.Digest(ctx, b); err != nil || d != "sha256:"+hex.EncodeToString(replaced[:]) {
		t.Fatalf("Digest of a replaced archive = %q, %v; want its file's hash", d, err)
	}
	_, sum3, _, err := s.LoadHashed(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum3 != replaced {
		t.Fatal("LoadHashed's hash of a replaced archive is not its file's")
	}
	if err := s.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.StoredHash(ctx, b); ok {
		t.Fatal("StoredHash answered for deleted content")
	}
	if _, _, _, err := s.LoadHashed(ctx, b, nil); err == nil {
		t.Fatal("LoadHashed of deleted content succeeded")
	}
}

// TestLoadHashedWithoutSource: converted content loaded without its
// source's manifests keeps everything else and hashes the same bytes.
func TestLoadHashedWithoutSource(t *testing.T) {
	ctx := context.Background()
	s := &LocalDirectory{RootDirectory: t.TempDir()}
	b := bundle("b")
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	if err := s.Store(ctx, b, fstest.MapFS{
		"manifests/cm.json":                      file(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`),
		"registry+v1/manifests/csv.yaml":         file("kind: ClusterServiceVersion\n"),
		"registry+v1/metadata/annotations.yaml":  file("annotations: {}\n"),
		"registry+v1/metadata/dependencies.yaml": file("dependencies: []\n"),
	}); err != nil {
		t.Fatal(err)
	}
	all, sum, _, err := s.LoadHashed(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	some, sum2, _, err := s.LoadHashed(ctx, b, InstallContentWithoutSource)
	if err != nil {
		t.Fatal(err)
	}
	if sum != sum2 {
		t.Error("the hash depends on what was kept")
	}
	for name, want := range map[string]bool{
		"manifests/cm.json": true, "registry+v1/metadata/annotations.yaml": true, "registry+v1/metadata/dependencies.yaml": true,
		"registry+v1/manifests/csv.yaml": false,
	} {
		if _, err := fs.Stat(all, name); err != nil {
			t.Errorf("%s not loaded at all: %v", name, err)
		}
		if _, err := fs.Stat(some, name); (err == nil) != want {
			t.Errorf("%s kept without the source: %v, want %v", name, err == nil, want)
		}
	}
}
