package plain

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

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
	files := make([]File, 0, len(entries))
	for _, e := range entries {
		p := path.Join(ManifestsDir, e.Name())
		if e.IsDir() {
			return nil, fmt.Errorf("subdirectories are not allowed within the %q directory of the bundle image filesystem: found %q", ManifestsDir, p)
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		objs, err := Decode(p, data)
		if err != nil {
			return nil, err
		}
		files = append(files, File{Path: p, Objects: objs})
	}
	return files, nil
}
