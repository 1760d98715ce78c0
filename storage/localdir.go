package storage

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/freelist"
	"github.com/rukpak-dev/rukpak/internal/gzpool"
	"github.com/rukpak-dev/rukpak/unpack"
)

const (
	// archiveSuffix ends every stored bundle's file name.
	archiveSuffix = ".tgz"
	// tempPrefix starts every in-progress file's name. Bundle names cannot
	// start with a dot, so a temporary file can never be mistaken for (or
	// served as) a bundle's content.
	tempPrefix = "."
	// tempInfix follows the archive name in a temporary file's name:
	// .<name>.tgz.tmp-<random>.
	tempInfix = ".tmp-"
)

// LocalDirectory stores each Bundle's content as <RootDirectory>/<name>.tgz.
//
// Every write goes to a temporary file in the same directory that is then
// renamed over the final name, so readers (Load, the HTTP handler, another
// process) see either the old content or the new, never a partial file. It
// holds no locks: concurrent calls for any bundles are safe.
//
// Writes are not fsynced. The directory is a cache: every archive can be
// made again from its Bundle's pinned status.resolvedSource, and only a
// kernel crash or power loss (not a process crash) can leave a torn file
// under a final name. Such a file is caught instead: the first Exists of an
// archive in a process that did not write it reads it through (gzip
// checksum, tar structure) and removes it if broken, so the Bundle is
// unpacked again. Syncing cost as much as the rest of storing a large
// bundle (docs/benchmarks.md).
type LocalDirectory struct {
	// RootDirectory holds the archives; Store creates it if missing.
	RootDirectory string
	// BaseURL is where the content handler is served, for example
	// https://rukpak-core.rukpak-system.svc; URLFor appends
	// /bundles/<name>.tgz.
	BaseURL string
	// Limits bound the archives Load reads (unset fields take
	// unpack.DefaultLimits).
	Limits unpack.Limits
	// MaxLoadBytes bounds what Load keeps in memory: only the files
	// installs read (InstallContent) are kept. Zero means
	// DefaultMaxLoadBytes.
	MaxLoadBytes int64

	// checked holds, per archive name, the stamp of the file this process
	// wrote or read through whole; a file with another stamp is checked
	// again.
	checked sync.Map // string -> stamp
	// hashes holds, per archive name, the SHA-256 of the file this process
	// wrote or LoadHashed read, and that file (hash.go).
	hashes sync.Map // string -> hashedFile
}

// stamp identifies one version of an archive file.
type stamp struct {
	size    int64
	modTime time.Time
}

func stampOf(fi fs.FileInfo) stamp { return stamp{fi.Size(), fi.ModTime()} }

var _ Storage = (*LocalDirectory)(nil)

// Load reads the parts of the Bundle's stored content that installs read
// (InstallContent), streaming the archive and holding nothing else. Missing
// content is an error that wraps fs.ErrNotExist.
func (s *LocalDirectory) Load(_ context.Context, bundle *rukpakv1alpha1.Bundle) (fs.FS, error) {
	name, err := archiveName(bundle)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(s.RootDirectory, name))
	if err != nil {
		return nil, fmt.Errorf("loading content of bundle %q: %w", bundle.Name, err)
	}
	defer f.Close()
	fsys, err := ArchiveReader{Limits: s.Limits, MaxKeptBytes: s.MaxLoadBytes}.readBuffered(f)
	if err != nil {
		return nil, fmt.Errorf("loading content of bundle %q: %w", bundle.Name, err)
	}
	return fsys, nil
}

// Store writes fsys as the Bundle's content, atomically.
func (s *LocalDirectory) Store(ctx context.Context, bundle *rukpakv1alpha1.Bundle, fsys fs.FS) error {
	_, err := s.StoreHashed(ctx, bundle, fsys)
	return err
}

var _ HashingStorer = (*LocalDirectory)(nil)

// StoreHashed is Store, also returning the archive's SHA-256.
func (s *LocalDirectory) StoreHashed(ctx context.Context, bundle *rukpakv1alpha1.Bundle, fsys fs.FS) ([sha256.Size]byte, error) {
	name, err := archiveName(bundle)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	sum, err := s.store(ctx, name, fsys)
	if err != nil {
		return sum, fmt.Errorf("storing content of bundle %q: %w", bundle.Name, err)
	}
	return sum, nil
}

// archiveWriters are store's write buffers: one per Bundle stored was an
// eighth of what 10,000 installs of small bundles allocated.
var archiveWriters = freelist.New(2, func() *bufio.Writer { return bufio.NewWriterSize(nil, 256<<10) })

func (s *LocalDirectory) store(ctx context.Context, name string, fsys fs.FS) (sum [sha256.Size]byte, err error) {
	if err := os.MkdirAll(s.RootDirectory, 0o755); err != nil {
		return sum, fmt.Errorf("creating storage directory: %w", err)
	}
	tmp, err := os.CreateTemp(s.RootDirectory, tempPrefix+name+tempInfix+"*")
	if err != nil {
		return sum, fmt.Errorf("creating temporary file: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	// Large writes: the compressor emits at most 64 KiB at a time, and on a
	// 50 MiB bundle the system calls for those cost more than compressing.
	// Hashed as it is written: installs key what they decode from content
	// by this hash (hash.go), and the digest in the Bundle's status is it.
	h := sha256.New()
	bw := archiveWriters.Get()
	bw.Reset(io.MultiWriter(tmp, h))
	defer func() {
		bw.Reset(nil)
		archiveWriters.Put(bw)
	}()
	if err := WriteArchive(ctx, bw, fsys); err != nil {
		return sum, err
	}
	if err := bw.Flush(); err != nil {
		return sum, fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	fi, err := tmp.Stat()
	if err != nil {
		return sum, fmt.Errorf("reading %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return sum, fmt.Errorf("closing %s: %w", tmp.Name(), err)
	}
	// CreateTemp makes 0600 files; the archive is world-readable content.
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return sum, fmt.Errorf("setting mode of %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(s.RootDirectory, name)); err != nil {
		return sum, fmt.Errorf("renaming %s to %s: %w", tmp.Name(), name, err)
	}
	// Rename keeps inode, size and modification time: this is the file
	// just written, and needs no reading back.
	s.checked.Store(name, stampOf(fi))
	h.Sum(sum[:0])
	s.hashes.Store(name, hashedFile{id: idOf(fi), sum: sum})
	return sum, nil
}

// Exists reports whether the Bundle's content is stored and whole. An
// archive this process did not write is read through once; a broken one
// (torn by a crash of the machine) is removed and reported missing.
func (s *LocalDirectory) Exists(_ context.Context, bundle *rukpakv1alpha1.Bundle) (bool, error) {
	name, err := archiveName(bundle)
	if err != nil {
		return false, err
	}
	file := filepath.Join(s.RootDirectory, name)
	fi, err := os.Stat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("checking content of bundle %q: %w", bundle.Name, err)
	case !fi.Mode().IsRegular():
		return false, nil
	}
	if st, ok := s.checked.Load(name); ok && st.(stamp) == stampOf(fi) {
		return true, nil
	}
	if err := checkFile(file); err != nil {
		if rmErr := os.Remove(file); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
			return false, fmt.Errorf("removing broken content of bundle %q: %w", bundle.Name, errors.Join(err, rmErr))
		}
		return false, nil
	}
	s.checked.Store(name, stampOf(fi))
	return true, nil
}

// checkFile reads an archive through: gzip checks its CRC and length at the
// end, tar its structure.
func checkFile(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzpool.NewReader(f)
	if err != nil {
		return fmt.Errorf("reading gzip: %w", err)
	}
	defer gzpool.Put(gz)
	tr := tar.NewReader(gz)
	for {
		_, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading tar: %w", err)
		}
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return fmt.Errorf("reading tar: %w", err)
		}
	}
	// The gzip trailer follows the tar end marker.
	if _, err := io.Copy(io.Discard, gz); err != nil {
		return fmt.Errorf("reading gzip: %w", err)
	}
	return nil
}

// Delete removes the Bundle's content; missing content is not an error.
func (s *LocalDirectory) Delete(_ context.Context, bundle *rukpakv1alpha1.Bundle) error {
	name, err := archiveName(bundle)
	if err != nil {
		return err
	}
	s.checked.Delete(name)
	s.hashes.Delete(name)
	if err := os.Remove(filepath.Join(s.RootDirectory, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("deleting content of bundle %q: %w", bundle.Name, err)
	}
	return nil
}

// URLFor is <BaseURL>/bundles/<name>.tgz.
func (s *LocalDirectory) URLFor(_ context.Context, bundle *rukpakv1alpha1.Bundle) (string, error) {
	name, err := archiveName(bundle)
	if err != nil {
		return "", err
	}
	if s.BaseURL == "" {
		return "", errors.New("storage has no base URL to build content URLs from")
	}
	u, err := url.JoinPath(s.BaseURL, BundlesPath, name)
	if err != nil {
		return "", fmt.Errorf("building content URL from base %q: %w", s.BaseURL, err)
	}
	return u, nil
}

// RemoveStaleTempFiles deletes temporary files older than olderThan, left
// behind by a process that died between writing and renaming. A grace
// period (a few minutes, say) keeps it from racing a Store in progress in
// another process that shares the directory. A missing directory is not an
// error.
func (s *LocalDirectory) RemoveStaleTempFiles(olderThan time.Duration) error {
	entries, err := os.ReadDir(s.RootDirectory)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing storage directory: %w", err)
	}
	cutoff := time.Now().Add(-olderThan)
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() || !isTempFile(e.Name()) {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // renamed or removed meanwhile
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reading %s: %w", e.Name(), err))
			continue
		}
		if info.ModTime().After(cutoff) {
			continue
		}
		if err := os.Remove(filepath.Join(s.RootDirectory, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing stale temporary file: %w", err))
		}
	}
	return errors.Join(errs...)
}

// isTempFile reports whether name is one of Store's temporary files.
func isTempFile(name string) bool {
	return strings.HasPrefix(name, tempPrefix) && strings.Contains(name, archiveSuffix+tempInfix)
}

// archiveName is the file name of a Bundle's content. Bundle names are
// DNS-1123 subdomains, which cannot contain a slash or start with a dot; the
// check keeps a malformed object from naming a path outside the directory.
func archiveName(bundle *rukpakv1alpha1.Bundle) (string, error) {
	if bundle == nil {
		return "", errors.New("bundle is nil")
	}
	if err := validBundleName(bundle.Name); err != nil {
		return "", err
	}
	return bundle.Name + archiveSuffix, nil
}

func validBundleName(name string) error {
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return fmt.Errorf("invalid bundle name %q: %s", name, strings.Join(msgs, "; "))
	}
	return nil
}
