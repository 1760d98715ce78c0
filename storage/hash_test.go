package storage

import (
	"context"
	"crypto/sha256"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
)

// TestLoadHashed proves the hash names the bytes of the file loaded, is
// answered by a stat while that file stays, and is forgotten once the
// archive is replaced or deleted.
func TestLoadHashed(t *testing.T) {
	ctx := context.Background()
	s := &LocalDirectory{RootDirectory: t.TempDir()}
	b := bundle("b")
	if _, ok := s.StoredHash(ctx, b); ok {
		t.Fatal("a hash before anything was loaded")
	}
	content := func(v string) fstest.MapFS {
		return fstest.MapFS{"manifests/cm.yaml": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + v + "\n")}}
	}
	if err := s.Store(ctx, b, content("one")); err != nil {
		t.Fatal(err)
	}
	fsys, sum, ok, err := s.LoadHashed(ctx, b, nil)
	if err != nil || !ok {
		t.Fatalf("LoadHashed: %v, ok %v", err, ok)
	}
	if _, err := fsys.Open("manifests/cm.yaml"); err != nil {
		t.Fatalf("loaded content lacks its file: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(s.RootDirectory, "b.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(raw) != sum {
		t.Fatal("the hash is not the SHA-256 of the whole archive file")
	}
	if got, ok := s.StoredHash(ctx, b); !ok || got != sum {
		t.Fatalf("StoredHash = %x, %v; want the loaded hash", got, ok)
	}

	// Replaced (a new archive renamed over it): the old hash is not given.
	if err := s.Store(ctx, b, content("two")); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.StoredHash(ctx, b); ok {
		t.Fatal("StoredHash answered for an archive replaced since it was hashed")
	}
	_, sum2, _, err := s.LoadHashed(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum2 == sum {
		t.Fatal("different content hashed alike")
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
