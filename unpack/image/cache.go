package image

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/rukpak-dev/rukpak/unpack"
)

// The cache keeps one finished tree (see unpack.Tree: a spool file and its
// index) per image digest:
//
//	<BaseDir>/images/<algorithm>/<hex>/   complete, immutable trees
//	<BaseDir>/images/tmp/                 trees being extracted
//
// A tree is extracted in tmp and renamed into place only once complete, so a
// crash or failure mid-pull never leaves a partial tree that looks finished.

func (u *Unpacker) cacheDir(d v1.Hash) string {
	return filepath.Join(u.cfg.BaseDir, "images", d.Algorithm, d.Hex)
}

func (u *Unpacker) tmpDir() string { return filepath.Join(u.cfg.BaseDir, "images", "tmp") }

// cached opens the complete tree of d, or returns nil if there is none.
// It only reads: a caller outside u.pulls that removed an unusable entry
// could remove the tree another caller's flight had just committed (CI saw
// eight concurrent unpacks pull twice).
func (u *Unpacker) cached(d v1.Hash) (*unpack.Tree, error) {
	tree, err := unpack.OpenTree(u.cacheDir(d))
	switch {
	case err == nil:
		return tree, nil
	case errors.Is(err, unpack.ErrNoTree):
		return nil, nil
	}
	return nil, fmt.Errorf("checking image cache: %w", err)
}

// cachedOrClear is cached for the flight of d, the only writer of its
// entry: a directory there that is not a sealed tree (left by a crash, or
// by an older version's layout) is removed, to be extracted again.
func (u *Unpacker) cachedOrClear(d v1.Hash) (*unpack.Tree, error) {
	dir := u.cacheDir(d)
	tree, err := unpack.OpenTree(dir)
	switch {
	case err == nil:
		return tree, nil
	case errors.Is(err, unpack.ErrNoTree):
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("removing unusable image cache entry: %w", err)
		}
		return nil, nil
	}
	return nil, fmt.Errorf("checking image cache: %w", err)
}

// commit moves a finished tree into place. Losing a race to an identical
// tree is fine: the content is addressed by digest.
func commit(tmp, dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("creating image cache: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(dir); statErr == nil {
			return os.RemoveAll(tmp)
		}
		return fmt.Errorf("committing image cache entry: %w", err)
	}
	return nil
}

// Forget deletes the cached tree of digest (e.g. "sha256:…"), for garbage
// collection once no Bundle uses it. It is idempotent.
func (u *Unpacker) Forget(digest string) error {
	d, err := v1.NewHash(digest)
	if err != nil {
		return fmt.Errorf("forgetting image cache entry: %w", err)
	}
	return os.RemoveAll(u.cacheDir(d))
}
