package plain

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"runtime"

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
// sorted by name. A missing directory, a subdirectory, an unreadable file or
// a malformed document is an error naming the path.
func Files(fsys fs.FS) ([]File, error) {
	entries, err := fs.ReadDir(fsys, ManifestsDir)
	if err != nil {
		// fs implementations disagree on the op ("open" vs "readdir"); report
		// a missing directory the same way whatever the bundle was read from.
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &fs.PathError{Op: "readdir", Path: ManifestsDir, Err: fs.ErrNotExist}
		}
		return nil, err
	}
	files := make([]File, len(entries))
	for i, e := range entries {
		files[i].Path = path.Join(ManifestsDir, e.Name())
		if e.IsDir() {
			return nil, fmt.Errorf("subdirectories are not allowed within the %q directory of the bundle image filesystem: found %q", ManifestsDir, files[i].Path)
		}
	}
	// Decoding is most of the work for a large bundle, and files decode
	// independently: use every core, then report the first failing file in
	// name order, as a sequential read would.
	errs := make([]error, len(files))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range files {
		g.Go(func() error {
			data, err := fs.ReadFile(fsys, files[i].Path)
			if err != nil {
				errs[i] = fmt.Errorf("read %s: %w", files[i].Path, err)
				return nil
			}
			files[i].Objects, errs[i] = Decode(files[i].Path, data)
			return nil
		})
	}
	_ = g.Wait()
	if err := firstError(errs); err != nil {
		return nil, err
	}
	return files, nil
}

func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
