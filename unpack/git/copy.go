package git

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/rukpak-dev/rukpak/unpack"
)

// copyDirectory writes directory dir (clean, "." for the root) of commit
// into tree. Only regular files and directories are written: symlinks are
// skipped, never followed, and submodules are skipped. raw is the field
// value, for messages.
func copyDirectory(ctx context.Context, tree *unpack.Tree, commit *object.Commit, dir, raw string) error {
	root, err := commit.Tree()
	if err != nil {
		return fmt.Errorf("reading tree of commit %s: %w", commit.Hash, err)
	}
	if dir != "." {
		entry, err := root.FindEntry(dir)
		if errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
			return unpack.Terminal(fmt.Errorf("source.git.directory %q not found in commit %s", raw, commit.Hash))
		}
		if err != nil {
			return fmt.Errorf("finding directory %q in commit %s: %w", raw, commit.Hash, err)
		}
		if entry.Mode != filemode.Dir {
			return unpack.Terminal(fmt.Errorf("source.git.directory %q in commit %s is not a directory", raw, commit.Hash))
		}
		if root, err = root.Tree(dir); err != nil {
			return fmt.Errorf("reading directory %q of commit %s: %w", raw, commit.Hash, err)
		}
	}
	return copyTree(ctx, tree, root, "")
}

func copyTree(ctx context.Context, out *unpack.Tree, t *object.Tree, prefix string) error {
	for i := range t.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		e := &t.Entries[i]
		// Git never writes these names; a crafted tree might.
		if e.Name == "" || e.Name == "." || e.Name == ".." || strings.ContainsAny(e.Name, "/\\\x00") {
			return unpack.Terminal(fmt.Errorf("repository contains an invalid file name %q in %q", e.Name, prefix))
		}
		name := path.Join(prefix, e.Name)
		switch e.Mode {
		case filemode.Dir:
			sub, err := t.Tree(e.Name)
			if err != nil {
				return fmt.Errorf("reading directory %s: %w", name, err)
			}
			if err := out.Mkdir(name); err != nil {
				return err
			}
			if err := copyTree(ctx, out, sub, name); err != nil {
				return err
			}
		case filemode.Regular, filemode.Deprecated, filemode.Executable:
			if err := copyFile(out, t, e, name); err != nil {
				return err
			}
		default:
			// Symlinks and submodules: nothing safe to write.
		}
	}
	return nil
}

func copyFile(out *unpack.Tree, t *object.Tree, e *object.TreeEntry, name string) error {
	f, err := t.TreeEntryFile(e)
	if err != nil {
		return fmt.Errorf("reading file %s: %w", name, err)
	}
	r, err := f.Reader()
	if err != nil {
		return fmt.Errorf("reading file %s: %w", name, err)
	}
	defer r.Close()
	mode := fs.FileMode(0o644)
	if e.Mode == filemode.Executable {
		mode = 0o755
	}
	return out.WriteFile(name, r, mode)
}
