// Package plain implements the plain+v0 bundle format: a flat manifests/
// directory holding Kubernetes objects as YAML or JSON documents.
package plain

import (
	"errors"
	"io/fs"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ManifestsDir is the directory of a plain+v0 bundle that holds its objects.
const ManifestsDir = "manifests"

// errZeroObjects is returned by Validate for a bundle with no objects.
var errZeroObjects = errors.New("found zero objects: plain+v0 bundles are required to contain at least one object")

// Validate checks that fsys is a plain+v0 bundle: a flat manifests/
// directory whose files decode to at least one well-formed object. It
// decodes within DefaultLimits.
func Validate(fsys fs.FS) error {
	return DefaultLimits.Validate(fsys)
}

// Validate is the package's Validate within l. It keeps no object: memory
// is what the documents being decoded need, not the bundle's size.
func (l Limits) Validate(fsys fs.FS) error {
	paths, err := l.manifests(fsys)
	if err != nil {
		return err
	}
	var n atomic.Int64
	if err := l.OrDefault().each(fsys, paths, func(int, *unstructured.Unstructured) error {
		n.Add(1)
		return nil
	}); err != nil {
		return err
	}
	if n.Load() == 0 {
		return errZeroObjects
	}
	return nil
}

// Objects returns every object of the bundle in file-name, then document,
// order, within DefaultLimits. It enforces the same layout rules as
// Validate but returns an empty slice (not an error) for a bundle with no
// objects.
func Objects(fsys fs.FS) ([]*unstructured.Unstructured, error) {
	return DefaultLimits.Objects(fsys)
}

// Objects is the package's Objects within l.
func (l Limits) Objects(fsys fs.FS) ([]*unstructured.Unstructured, error) {
	files, err := l.Files(fsys)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		objs = append(objs, f.Objects...)
	}
	return objs, nil
}
