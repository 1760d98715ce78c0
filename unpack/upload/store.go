// Package upload implements the upload source: tar.gz archives a user
// uploads to the provisioner's content service for one Bundle of source
// type upload (PUT /uploads/<name>.tgz, see Handler), kept by the Bundle's
// UID until its finalizer releases them, and unpacked like any other
// source (see Unpacker).
package upload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/archive"
)

const (
	archiveSuffix = ".tgz"
	tempPrefix    = ".upload-"
)

// Store keeps one uploaded archive per Bundle UID in a directory.
type Store struct {
	dir    string
	limits unpack.Limits

	mu sync.Mutex
	// waiters are closed when an archive for their UID arrives.
	waiters map[types.UID]chan struct{}
}

// NewStore keeps archives in dir (created if missing), checked against
// limits as any source's content is.
func NewStore(dir string, limits unpack.Limits) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating upload directory: %w", err)
	}
	return &Store{dir: dir, limits: limits.OrDefault(), waiters: map[types.UID]chan struct{}{}}, nil
}

// Limits are the bounds every upload is checked against.
func (s *Store) Limits() unpack.Limits { return s.limits }

// path is where uid's archive is kept. A UID is the API server's, but it
// names a file here, so anything but a UUID's characters is refused.
func (s *Store) path(uid types.UID) (string, error) {
	if uid == "" || len(uid) > 64 || strings.Trim(string(uid), "0123456789abcdefABCDEF-") != "" {
		return "", fmt.Errorf("invalid bundle UID %q", uid)
	}
	return filepath.Join(s.dir, string(uid)+archiveSuffix), nil
}

// ErrTooLarge is wrapped by Receive's error when the archive is larger than
// the fetch limit.
var ErrTooLarge = errors.New("upload too large")

// ErrContent is wrapped by Receive's error when the archive is not a
// gzip-compressed tar archive within the content limits.
var ErrContent = errors.New("content refused")

// Received is an archive read into the store's directory, not yet bound to
// a Bundle: Commit or Discard it.
type Received struct {
	Path   string
	Digest string
	Size   int64
}

// Discard removes an archive that was not committed.
func (r *Received) Discard() {
	if r != nil && r.Path != "" {
		_ = os.Remove(r.Path)
	}
}

// Receive reads an archive from body into a temporary file, at most the
// fetch limit of bytes, and checks it as the unpacker will: gzip, tar, the
// content limits (sizes, entries, paths). Nothing of the content is held in
// memory: it is extracted into a temporary tree on disk and discarded.
func (s *Store) Receive(ctx context.Context, body io.Reader, scratch string) (*Received, error) {
	f, err := os.CreateTemp(s.dir, tempPrefix)
	if err != nil {
		return nil, fmt.Errorf("creating upload file: %w", err)
	}
	rec := &Received{Path: f.Name()}
	fail := func(err error) (*Received, error) {
		_ = f.Close()
		rec.Discard()
		return nil, err
	}
	tree, err := unpack.NewTempTree(scratch, "upload-check-", s.limits)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = tree.Discard() }()
	h := sha256.New()
	counted := unpack.LimitReader(body, s.limits.MaxFetchBytes, tooLarge)
	r := io.TeeReader(counted, io.MultiWriter(f, h))
	// The gzip trailer and tar padding are part of the archive's digest.
	if err := archive.ExtractWhole(ctx, r, tree, archive.Options{RequireGzip: true}); err != nil {
		switch {
		case errors.Is(err, ErrTooLarge):
			return fail(err)
		case ctx.Err() != nil:
			return fail(fmt.Errorf("reading the upload: %w", ctx.Err()))
		case errors.Is(err, archive.ErrNotGzip):
			return fail(fmt.Errorf("%w: gzip: invalid header: the upload is not a gzip-compressed tar archive", ErrContent))
		case unpack.IsTerminal(err):
			return fail(fmt.Errorf("%w: %w", ErrContent, err))
		}
		return fail(fmt.Errorf("reading the upload: %w", err))
	}
	size, err := f.Seek(0, io.SeekCurrent) // every byte read was written to f
	if err != nil {
		return fail(fmt.Errorf("writing upload file: %w", err))
	}
	if err := f.Close(); err != nil {
		rec.Discard()
		return nil, fmt.Errorf("writing upload file: %w", err)
	}
	rec.Digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	rec.Size = size
	return rec, nil
}

func tooLarge(limit int64) error {
	return fmt.Errorf("%w: more than the limit of %d bytes", ErrTooLarge, limit)
}

// CommitResult is what Commit did.
type CommitResult int

const (
	// Created: the archive is now uid's.
	Created CommitResult = iota
	// Unchanged: uid already had this very archive.
	Unchanged
	// Conflict: uid already has another archive; nothing changed.
	Conflict
)

// Commit makes rec uid's archive unless uid has one already (or recorded
// is set: the digest a Bundle already unpacked), and wakes the unpacks
// waiting for it. It returns the digest uid's content has afterwards.
func (s *Store) Commit(uid types.UID, rec *Received, recorded string) (CommitResult, string, error) {
	dst, err := s.path(uid)
	if err != nil {
		rec.Discard()
		return Conflict, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	current, err := digestOf(dst)
	have := err == nil
	switch {
	case errors.Is(err, fs.ErrNotExist):
		current = recorded
	case err != nil:
		rec.Discard()
		return Conflict, "", err
	}
	if current != "" && current != rec.Digest {
		rec.Discard()
		return Conflict, current, nil
	}
	if have {
		rec.Discard()
		return Unchanged, current, nil
	}
	// No archive yet, or the Bundle unpacked this very content and its
	// archive was lost (an emptied volume): keep it.
	if err := os.Rename(rec.Path, dst); err != nil {
		rec.Discard()
		return Conflict, "", fmt.Errorf("storing upload: %w", err)
	}
	if ch, ok := s.waiters[uid]; ok {
		close(ch)
		delete(s.waiters, uid)
	}
	if current == rec.Digest {
		return Unchanged, current, nil
	}
	return Created, rec.Digest, nil
}

// digestOf is the sha256 of the file at p.
func digestOf(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// open returns uid's archive, or a channel closed when it arrives.
func (s *Store) open(uid types.UID) (*os.File, <-chan struct{}, error) {
	p, err := s.path(uid)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.Open(p)
	if err == nil {
		return f, nil, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	ch, ok := s.waiters[uid]
	if !ok {
		ch = make(chan struct{})
		s.waiters[uid] = ch
	}
	return nil, ch, nil
}

// Has reports whether uid has an archive.
func (s *Store) Has(uid types.UID) bool {
	p, err := s.path(uid)
	if err != nil {
		return false
	}
	_, err = os.Stat(p)
	return err == nil
}

// Release removes uid's archive (the Bundle is being deleted).
func (s *Store) Release(uid types.UID) error {
	p, err := s.path(uid)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.waiters[uid]; ok {
		close(ch)
		delete(s.waiters, uid)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing uploaded content: %w", err)
	}
	return nil
}

// Sweep removes the archives of UIDs keep does not report, and temporary
// files older than staleAfter (uploads interrupted by a crash): what was
// uploaded for Bundles deleted while no provisioner ran. Archives written
// after listedAt (when keep's Bundles were listed) are left alone: their
// Bundles may be newer than the list.
func (s *Store) Sweep(keep func(types.UID) bool, listedAt time.Time, staleAfter time.Duration) (int, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, fmt.Errorf("listing uploads: %w", err)
	}
	removed := 0
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, tempPrefix) {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > staleAfter {
				if err := os.Remove(filepath.Join(s.dir, name)); err == nil {
					removed++
				}
			}
			continue
		}
		uid, ok := strings.CutSuffix(name, archiveSuffix)
		if !ok || keep(types.UID(uid)) {
			continue
		}
		if info, err := e.Info(); err != nil || !info.ModTime().Before(listedAt) {
			continue
		}
		if err := s.Release(types.UID(uid)); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}
