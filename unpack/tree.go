package unpack

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Tree writes a bundle's files under a root directory, enforcing Limits and
// refusing any name that would land outside the root. Every source writes
// through a Tree, so the safety rules live in one place.
type Tree struct {
	root   string
	limits Limits
	bytes  int64
	files  int
}

// NewTree writes into root (which must exist) within limits.
func NewTree(root string, limits Limits) *Tree {
	return &Tree{root: root, limits: limits.OrDefault()}
}

// Root is the directory the tree is written in.
func (t *Tree) Root() string { return t.root }

// CleanName turns an archive or repository path into a clean, slash-separated
// path relative to the root. It rejects absolute paths and paths that leave
// the root, naming the offending path.
func CleanName(name string) (string, error) {
	n := strings.ReplaceAll(name, "\\", "/")
	if strings.HasPrefix(n, "/") || filepath.IsAbs(name) {
		return "", fmt.Errorf("path %q is absolute", name)
	}
	clean := path.Clean(n)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("path %q escapes the bundle root", name)
	}
	return clean, nil
}

func (t *Tree) path(name string) (string, string, error) {
	clean, err := CleanName(name)
	if err != nil {
		return "", "", Terminal(err)
	}
	return clean, filepath.Join(t.root, filepath.FromSlash(clean)), nil
}

func (t *Tree) count() error {
	t.files++
	if t.files > t.limits.MaxFiles {
		return Terminal(fmt.Errorf("bundle has more than %d files and directories", t.limits.MaxFiles))
	}
	return nil
}

// Mkdir creates directory name and its parents.
func (t *Tree) Mkdir(name string) error {
	clean, p, err := t.path(name)
	if err != nil || clean == "." {
		return err
	}
	if err := t.count(); err != nil {
		return err
	}
	return os.MkdirAll(p, 0o755)
}

// WriteFile writes r to file name, replacing what was there, and fails once
// the total size would pass the limit. mode keeps only the executable bit.
func (t *Tree) WriteFile(name string, r io.Reader, mode fs.FileMode) error {
	clean, p, err := t.path(name)
	if err != nil {
		return err
	}
	if clean == "." {
		return Terminal(fmt.Errorf("path %q is not a file name", name))
	}
	if err := t.count(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	// A previous layer may have left a symlink or directory here; never
	// write through it.
	if err := os.RemoveAll(p); err != nil {
		return err
	}
	perm := fs.FileMode(0o644)
	if mode&0o111 != 0 {
		perm = 0o755
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	remaining := t.limits.MaxBytes - t.bytes
	n, err := io.Copy(f, io.LimitReader(r, remaining+1))
	t.bytes += n
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", clean, err)
	}
	if n > remaining {
		return Terminal(fmt.Errorf("bundle content exceeds the limit of %d bytes (at %s)", t.limits.MaxBytes, clean))
	}
	return nil
}

// Remove deletes name (file or directory), for layer whiteouts.
func (t *Tree) Remove(name string) error {
	clean, p, err := t.path(name)
	if err != nil {
		return err
	}
	if clean == "." {
		return Terminal(fmt.Errorf("path %q cannot be removed", name))
	}
	return os.RemoveAll(p)
}

// FS is the tree as a read-only filesystem.
func (t *Tree) FS() fs.FS { return os.DirFS(t.root) }
