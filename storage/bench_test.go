package storage

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rukpak-dev/rukpak/unpack"
)

// BenchmarkStore stores one incompressible 50 MiB file from an unpack
// tree, as the Bundle reconciler does after an image unpack.
func BenchmarkStore(b *testing.B) {
	data := make([]byte, 50<<20)
	_, _ = rand.NewChaCha8([32]byte{}).Read(data)
	tree, err := unpack.NewTree(b.TempDir(), unpack.Limits{MaxBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	if err := tree.WriteFile("manifests/blob", strings.NewReader(string(data)), 0o644); err != nil {
		b.Fatal(err)
	}
	fsys := tree.FS()
	s := &LocalDirectory{RootDirectory: b.TempDir()}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := s.Store(context.Background(), bundle("b"), fsys); err != nil {
			b.Fatal(err)
		}
	}
}
