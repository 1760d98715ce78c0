package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// Digester is a Storage that can tell the digest of a Bundle's stored
// archive, recorded as status.contentDigest for FallbackLoader to verify.
type Digester interface {
	// Digest is "sha256:<hex>" of the stored archive's bytes, exactly as
	// the content handler serves them.
	Digest(ctx context.Context, bundle *rukpakv1alpha1.Bundle) (string, error)
}

var _ Digester = (*LocalDirectory)(nil)

// Digest hashes the Bundle's stored archive, or says the hash taken when
// this process stored or read that very file.
func (s *LocalDirectory) Digest(ctx context.Context, bundle *rukpakv1alpha1.Bundle) (string, error) {
	if sum, ok := s.StoredHash(ctx, bundle); ok {
		return "sha256:" + hex.EncodeToString(sum[:]), nil
	}
	name, err := archiveName(bundle)
	if err != nil {
		return "", err
	}
	f, err := os.Open(filepath.Join(s.RootDirectory, name))
	if err != nil {
		return "", fmt.Errorf("hashing content of bundle %q: %w", bundle.Name, err)
	}
	defer f.Close()
	h := sha256.New()
	// A pooled buffer: io.Copy allocates 32 KiB per call (through
	// *os.File's WriteTo, which the wrapper hides).
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	if _, err := io.CopyBuffer(h, struct{ io.Reader }{f}, *buf); err != nil {
		return "", fmt.Errorf("hashing content of bundle %q: %w", bundle.Name, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
