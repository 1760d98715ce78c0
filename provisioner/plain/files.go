package plain

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"runtime"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// File is one manifest file of a bundle and the objects decoded from it.
type File struct {
	// Path is slash-separated and relative to the bundle root, e.g.
	// "manifests/deployment.yaml".
	Path    string
	Objects []*unstructured.Unstructured
}

// Files reads and decodes every file of the bundle's manifests/ directory,
// sorted by name, within DefaultLimits. A missing directory, a
// subdirectory, an unreadable file or a malformed document is an error
// naming the path.
func Files(fsys fs.FS) ([]File, error) {
	return DefaultLimits.Files(fsys)
}

// Files is the package's Files within l.
func (l Limits) Files(fsys fs.FS) ([]File, error) {
	paths, err := l.manifests(fsys)
	if err != nil {
		return nil, err
	}
	files := make([]File, len(paths))
	for i, p := range paths {
		files[i].Path = p
	}
	err = l.OrDefault().each(fsys, paths, func(i int, obj *unstructured.Unstructured) error {
		files[i].Objects = append(files[i].Objects, obj)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return files, nil
}

// manifests lists the files of manifests/, checking the layout and the
// sizes the directory declares (each file's size is enforced again while it
// is read).
func (l Limits) manifests(fsys fs.FS) ([]string, error) {
	l = l.OrDefault()
	entries, err := fs.ReadDir(fsys, ManifestsDir)
	if err != nil {
		// fs implementations disagree on the op ("open" vs "readdir"); report
		// a missing directory the same way whatever the bundle was read from.
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &fs.PathError{Op: "readdir", Path: ManifestsDir, Err: fs.ErrNotExist}
		}
		return nil, err
	}
	paths := make([]string, len(entries))
	var total int64
	for i, e := range entries {
		paths[i] = path.Join(ManifestsDir, e.Name())
		if e.IsDir() {
			return nil, fmt.Errorf("subdirectories are not allowed within the %q directory of the bundle image filesystem: found %q", ManifestsDir, paths[i])
		}
		info, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", paths[i], err)
		}
		if info.Size() > l.MaxFileBytes {
			return nil, l.fileTooLarge(paths[i])
		}
		if total += info.Size(); total > l.MaxTotalBytes {
			return nil, l.filesTooLarge()
		}
	}
	return paths, nil
}

// each decodes the files at paths, one reader per file, and hands each
// object to visit with the index of its file; objects of one file arrive
// in order, files concurrently. Decoding is most of the work for a large
// bundle and files decode independently: use every core (the process's
// reading slots and decoding budget bound the memory), then report the
// first failing file in name order, as a sequential read would.
func (l Limits) each(fsys fs.FS, paths []string, visit func(i int, obj *unstructured.Unstructured) error) error {
	errs := make([]error, len(paths))
	var total atomic.Int64
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, p := range paths {
		g.Go(func() error {
			if err := reading.Acquire(context.Background(), 1); err != nil {
				errs[i] = err
				return nil
			}
			defer reading.Release(1)
			f, err := fsys.Open(p)
			if err != nil {
				errs[i] = fmt.Errorf("read %s: %w", p, err)
				return nil
			}
			defer f.Close()
			errs[i] = l.decode(p, f, &total, func(obj *unstructured.Unstructured) error { return visit(i, obj) })
			return nil
		})
	}
	_ = g.Wait()
	return firstError(errs)
}

func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
