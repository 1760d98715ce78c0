package storage

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// HashingLoader is a Loader that also says which bytes it loaded: the
// SHA-256 of the archive as this process stores it, hashed while it is
// read (never taken from a Bundle's status, which its writer could point
// at other content). Installs key what they decode from content by it.
type HashingLoader interface {
	Loader
	// LoadHashed is Load, also returning the SHA-256 of every byte of the
	// archive it read; ok is false for content that is not this process's
	// own (downloaded from another). keep chooses the files kept (nil:
	// InstallContent); the hash covers them all.
	LoadHashed(ctx context.Context, bundle *rukpakv1alpha1.Bundle, keep func(name string) bool) (fsys fs.FS, sum [sha256.Size]byte, ok bool, err error)
	// StoredHash is the SHA-256 of the Bundle's archive as this process
	// last stored it or LoadHashed read it, if the archive is still that
	// very file (same inode, size and modification time: archives are only
	// ever replaced by a rename); ok is false otherwise. One stat, nothing
	// read.
	StoredHash(ctx context.Context, bundle *rukpakv1alpha1.Bundle) (sum [sha256.Size]byte, ok bool)
}

// HashingStorer is a Storage whose Store also says which bytes it wrote:
// the SHA-256 of the archive, which a HashingLoader's StoredHash answers
// while the archive is that file.
type HashingStorer interface {
	StoreHashed(ctx context.Context, bundle *rukpakv1alpha1.Bundle, fsys fs.FS) (sum [sha256.Size]byte, err error)
}

// fileID identifies one archive file: a stamp and its inode.
type fileID struct {
	stamp
	inode uint64
}

func idOf(fi fs.FileInfo) fileID {
	id := fileID{stamp: stampOf(fi)}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.inode = st.Ino
	}
	return id
}

type hashedFile struct {
	id  fileID
	sum [sha256.Size]byte
}

var _ HashingLoader = (*LocalDirectory)(nil)

// LoadHashed is Load, hashing the archive's bytes as they are read (and
// the rest of the file after the tar's end).
func (s *LocalDirectory) LoadHashed(_ context.Context, bundle *rukpakv1alpha1.Bundle, keep func(string) bool) (fs.FS, [sha256.Size]byte, bool, error) {
	var sum [sha256.Size]byte
	name, err := archiveName(bundle)
	if err != nil {
		return nil, sum, false, err
	}
	f, err := os.Open(filepath.Join(s.RootDirectory, name))
	if err != nil {
		return nil, sum, false, fmt.Errorf("loading content of bundle %q: %w", bundle.Name, err)
	}
	defer f.Close()
	// The file read is the file stat'ed: a rename over the name in between
	// changes neither.
	fi, err := f.Stat()
	if err != nil {
		return nil, sum, false, fmt.Errorf("loading content of bundle %q: %w", bundle.Name, err)
	}
	h := sha256.New()
	r := io.TeeReader(f, h)
	fsys, err := ArchiveReader{Limits: s.Limits, MaxKeptBytes: s.MaxLoadBytes, Keep: keep}.readBuffered(r)
	if err != nil {
		return nil, sum, false, fmt.Errorf("loading content of bundle %q: %w", bundle.Name, err)
	}
	// What the buffered reader and gzip left unread: the hash covers the
	// whole file, or it would not name it.
	if _, err := io.Copy(io.Discard, r); err != nil {
		return nil, sum, false, fmt.Errorf("loading content of bundle %q: %w", bundle.Name, err)
	}
	h.Sum(sum[:0])
	s.hashes.Store(name, hashedFile{id: idOf(fi), sum: sum})
	return fsys, sum, true, nil
}

// StoredHash answers from the hash of the last Store or LoadHashed, if the
// archive is the same file.
func (s *LocalDirectory) StoredHash(_ context.Context, bundle *rukpakv1alpha1.Bundle) ([sha256.Size]byte, bool) {
	name, err := archiveName(bundle)
	if err != nil {
		return [sha256.Size]byte{}, false
	}
	v, ok := s.hashes.Load(name)
	if !ok {
		return [sha256.Size]byte{}, false
	}
	fi, err := os.Stat(filepath.Join(s.RootDirectory, name))
	if err != nil || !fi.Mode().IsRegular() || idOf(fi) != v.(hashedFile).id {
		return [sha256.Size]byte{}, false
	}
	return v.(hashedFile).sum, true
}

var _ HashingLoader = (*FallbackLoader)(nil)

// LoadHashed is Load; only content stored here (by a HashingLoader Local)
// has a hash, downloaded content none.
func (l *FallbackLoader) LoadHashed(ctx context.Context, bundle *rukpakv1alpha1.Bundle, keep func(string) bool) (fs.FS, [sha256.Size]byte, bool, error) {
	if bundle == nil {
		return nil, [sha256.Size]byte{}, false, errors.New("bundle is nil")
	}
	if local, ok := l.Local.(HashingLoader); ok {
		fsys, sum, ok, err := local.LoadHashed(ctx, bundle, keep)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return fsys, sum, ok, err
		}
	}
	fsys, err := l.Load(ctx, bundle)
	return fsys, [sha256.Size]byte{}, false, err
}

// StoredHash is Local's, for content stored here.
func (l *FallbackLoader) StoredHash(ctx context.Context, bundle *rukpakv1alpha1.Bundle) ([sha256.Size]byte, bool) {
	if local, ok := l.Local.(HashingLoader); ok && bundle != nil {
		return local.StoredHash(ctx, bundle)
	}
	return [sha256.Size]byte{}, false
}
