package image

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/rukpak-dev/rukpak/unpack"
)

// The cache keeps one finished tree (see unpack.Tree: a spool file and its
// index) per repository and image digest:
//
//	<BaseDir>/images/<repository key>/<algorithm>/<hex>/   complete, immutable trees
//	<BaseDir>/images/tmp/                                  trees being extracted
//
// A tree is extracted in tmp and renamed into place only once complete, so a
// crash or failure mid-pull never leaves a partial tree that looks finished.
// The repository is part of the key: a registry answers for its own
// repositories only, so a Bundle naming a digest in another repository (a
// registry of its own, which may claim any digest) never reaches a tree
// pulled from a private one.

// image names one cache entry: a repository and a digest in it.
type image struct {
	repo   string // name.Repository.Name(), e.g. "registry.example.com/team/app"
	digest v1.Hash
}

func imageOf(ref name.Digest, d v1.Hash) image { return image{repo: ref.Context().Name(), digest: d} }

func (i image) String() string { return i.repo + "@" + i.digest.String() }

func (u *Unpacker) cacheDir(i image) string {
	key := sha256.Sum256([]byte(i.repo))
	return filepath.Join(u.cfg.BaseDir, "images", hex.EncodeToString(key[:16]), i.digest.Algorithm, i.digest.Hex)
}

func (u *Unpacker) tmpDir() string { return filepath.Join(u.cfg.BaseDir, "images", "tmp") }

// cached opens the complete tree of d, or returns nil if there is none.
// It only reads: a caller outside u.pulls that removed an unusable entry
// could remove the tree another caller's flight had just committed (CI saw
// eight concurrent unpacks pull twice).
func (u *Unpacker) cached(d image) (*unpack.Tree, error) {
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
func (u *Unpacker) cachedOrClear(d image) (*unpack.Tree, error) {
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

// Forget deletes the cached tree of ref, a pinned reference
// ("repository@sha256:…"), for garbage collection once no Bundle uses it.
// It is idempotent.
func (u *Unpacker) Forget(ref string) error {
	r, err := name.NewDigest(ref)
	if err != nil {
		return fmt.Errorf("forgetting image cache entry: %w", err)
	}
	d, err := v1.NewHash(r.DigestStr())
	if err != nil {
		return fmt.Errorf("forgetting image cache entry: %w", err)
	}
	return os.RemoveAll(u.cacheDir(imageOf(r, d)))
}
