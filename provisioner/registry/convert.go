package registry

import (
	"fmt"
	"io/fs"
	"path"
	"strings"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/provisioner/plain"
)

// SourceDir is where converted content keeps the original registry+v1 tree.
const SourceDir = "registry+v1"

// Convert validates the registry+v1 bundle at the root of fsys and returns
// plain+v0 content: manifests/ holds the objects to install, one per file
// named "<index>_<kind>_<name>.yaml", and SourceDir holds a copy of the
// original bundle. The same bundle and options always give byte-identical
// output.
func Convert(fsys fs.FS, opts Options) (fs.FS, error) {
	objs, err := Render(fsys, opts)
	if err != nil {
		return nil, err
	}
	out := fstest.MapFS{}
	width := len(fmt.Sprint(len(objs) - 1))
	if width < 2 {
		width = 2
	}
	for i, obj := range objs {
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			return nil, fmt.Errorf("encode %s %q: %w", obj.GetKind(), obj.GetName(), err)
		}
		name := fmt.Sprintf("%0*d_%s_%s.yaml", width, i, strings.ToLower(obj.GetKind()), fileSafe(obj.GetName()))
		out[path.Join(plain.ManifestsDir, name)] = &fstest.MapFile{Data: data, Mode: 0o644}
	}
	if err := copyTree(out, fsys, SourceDir); err != nil {
		return nil, err
	}
	return out, nil
}

// Render validates the registry+v1 bundle at the root of fsys and returns
// the objects to install, in install-friendly order: Namespace, CRDs,
// ServiceAccounts, RBAC, the bundle's other objects, Deployments.
func Render(fsys fs.FS, opts Options) ([]*unstructured.Unstructured, error) {
	b, err := load(fsys)
	if err != nil {
		return nil, err
	}
	t, err := resolveTarget(b, opts)
	if err != nil {
		return nil, err
	}
	return generate(b, t)
}

// IsRegistryContent reports whether fsys is converted content that still
// carries its registry+v1 source, i.e. can be re-rendered with other Options
// through Convert(fs.Sub(fsys, SourceDir), opts).
func IsRegistryContent(fsys fs.FS) bool {
	fi, err := fs.Stat(fsys, path.Join(SourceDir, AnnotationsFile))
	return err == nil && fi.Mode().IsRegular()
}

// copyTree copies the regular files of src into dst under prefix.
func copyTree(dst fstest.MapFS, src fs.FS, prefix string) error {
	return fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("copy bundle source: %w", err)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := fs.ReadFile(src, p)
		if err != nil {
			return fmt.Errorf("copy bundle source: %w", err)
		}
		dst[path.Join(prefix, p)] = &fstest.MapFile{Data: data, Mode: 0o644}
		return nil
	})
}

// fileSafe keeps object names usable as file names (ClusterRole names may
// hold ':' for example).
func fileSafe(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '_'
	}, name)
}
