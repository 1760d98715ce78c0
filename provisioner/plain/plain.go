// Package plain implements the plain+v0 bundle format: a flat manifests/
// directory holding Kubernetes objects as YAML or JSON documents.
package plain

import (
	"errors"
	"io/fs"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ManifestsDir is the directory of a plain+v0 bundle that holds its objects.
const ManifestsDir = "manifests"

// errZeroObjects is returned by Validate for a bundle with no objects.
var errZeroObjects = errors.New("found zero objects: plain+v0 bundles are required to contain at least one object")

// Validate checks that fsys is a plain+v0 bundle: a flat manifests/
// directory whose files decode to at least one well-formed object.
func Validate(fsys fs.FS) error {
	objs, err := Objects(fsys)
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		return errZeroObjects
	}
	return nil
}

// Objects returns every object of the bundle in file-name, then document,
// order. It enforces the same layout rules as Validate but returns an empty
// slice (not an error) for a bundle with no objects.
func Objects(fsys fs.FS) ([]*unstructured.Unstructured, error) {
	files, err := Files(fsys)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		objs = append(objs, f.Objects...)
	}
	return objs, nil
}
