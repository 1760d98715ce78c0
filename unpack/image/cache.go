package image

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The cache keeps one finished tree per image digest:
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

// cached reports whether a complete tree for d exists.
func (u *Unpacker) cached(d v1.Hash) (string, bool, error) {
	dir := u.cacheDir(d)
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return dir, false, nil
	case err != nil:
		return "", false, fmt.Errorf("checking image cache: %w", err)
	case !info.IsDir():
		return "", false, fmt.Errorf("image cache entry %s is not a directory", dir)
	}
	return dir, true, nil
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
