package registry

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"
	"testing/fstest"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rukpak-dev/rukpak/internal/jsonmap"
	"github.com/rukpak-dev/rukpak/provisioner/plain"
)

// SourceDir is where converted content keeps the original registry+v1 tree.
const SourceDir = "registry+v1"

// Convert validates the registry+v1 bundle at the root of fsys and returns
// plain+v0 content: manifests/ holds the objects to install, one per file
// named "<index>_<kind>_<name>.json", and SourceDir holds the original
// bundle. The same bundle and options always give byte-identical output.
// The files are JSON (which is YAML, so any plain+v0 reader reads them):
// writing YAML cost ~70 bytes allocated per byte of output, the largest
// part of unpacking a registry+v1 bundle.
//
// The original bundle is not copied: SourceDir serves fsys's files as they
// are read, so fsys must stay readable while the result is used, and
// converting holds only the generated manifests (a bundle's other files
// may be large).
//
// The manifests are checked as plain+v0 decoding (within opts.Limits) will
// read them: a conversion that installs could not read back as exactly the
// objects rendered (and as Objects renders them for a config) is an error
// here, at unpack time, rather than at every install.
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
	files := make([]plain.Encoded, len(objs))
	for i, obj := range objs {
		// Without escaping "<", ">" and "&", which stay as the bundle has
		// them; a newline after each.
		data, err := jsonmap.Encode(obj.Object)
		if err != nil {
			return nil, fmt.Errorf("encode %s %q: %w", obj.GetKind(), obj.GetName(), err)
		}
		name := fmt.Sprintf("%0*d_%s_%s.json", width, i, strings.ToLower(obj.GetKind()), fileSafe(obj.GetName()))
		out[path.Join(plain.ManifestsDir, name)] = &fstest.MapFile{Data: data, Mode: 0o644}
		// The checks look at the object as decoding the JSON gives it.
		v, err := decodedForm(obj.Object)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", obj.GetKind(), obj.GetName(), err)
		}
		files[i] = plain.Encoded{Name: name, Data: data, Object: v.(map[string]any)}
	}
	if err := opts.Limits.CheckEncoded(files); err != nil {
		return nil, fmt.Errorf("the converted manifests cannot be installed: %w", err)
	}
	out[SourceDir] = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
	return &converted{generated: out, source: fsys, decoded: files}, nil
}

// Render validates the registry+v1 bundle at the root of fsys and returns
// the objects to install, in install-friendly order: Namespace, CRDs,
// ServiceAccounts, RBAC, the bundle's other objects, Deployments.
func Render(fsys fs.FS, opts Options) ([]*unstructured.Unstructured, error) {
	b, err := load(fsys, opts.Limits)
	if err != nil {
		return nil, err
	}
	t, err := resolveTarget(b, opts)
	if err != nil {
		return nil, err
	}
	if t.certProvider, err = certProvider(opts.CertificateProvider); err != nil {
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

// converted is Convert's result: the generated manifests, and the original
// bundle under SourceDir.
type converted struct {
	generated fstest.MapFS // holds SourceDir as an empty directory
	source    fs.FS

	mu      sync.Mutex
	decoded []plain.Encoded // until taken
}

var _ plain.Decoded = (*converted)(nil)

// TakeDecoded hands over the generated manifests with their objects, once,
// with an estimate of the heap the objects hold: the objects were made by
// rendering, not by decoding, and are given only if each is exactly what
// decoding its file gives (strings of valid UTF-8, no typed nil) and no
// part of one is shared with another or within it (rendering may set one
// map in two places) but as decoding shares them (jsonmap.SharedKey), so
// their new owner may change them as freely as objects decoded from the
// files.
func (c *converted) TakeDecoded() ([]plain.Encoded, int64) {
	c.mu.Lock()
	files := c.decoded
	c.decoded = nil
	c.mu.Unlock()
	values := make([]any, len(files))
	for i, f := range files {
		values[i] = f.Object
	}
	heap, ok := jsonmap.Owned(plain.DefaultLimits.MaxDepth, plain.DefaultLimits.MaxTotalNodes, values...)
	if !ok {
		return nil, 0
	}
	return files, heap
}

func (c *converted) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	rest, ok := strings.CutPrefix(name, SourceDir+"/")
	if !ok && name != SourceDir {
		return c.generated.Open(name)
	}
	if !ok {
		rest = "."
	}
	f, err := c.source.Open(rest)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, &fs.PathError{Op: pe.Op, Path: name, Err: pe.Err}
		}
		return nil, err
	}
	if rest == "." {
		return &sourceRoot{f}, nil
	}
	return f, nil
}

// sourceRoot is the source bundle's root, opened as SourceDir: it has
// SourceDir's name and the mode generated content gives it.
type sourceRoot struct{ fs.File }

func (r *sourceRoot) Stat() (fs.FileInfo, error) {
	fi, err := r.File.Stat()
	if err != nil {
		return nil, err
	}
	return renamed{fi}, nil
}

func (r *sourceRoot) ReadDir(n int) ([]fs.DirEntry, error) {
	d, ok := r.File.(fs.ReadDirFile)
	if !ok {
		return nil, &fs.PathError{Op: "readdir", Path: SourceDir, Err: errors.New("not implemented")}
	}
	return d.ReadDir(n)
}

// renamed describes SourceDir as the generated content lists it.
type renamed struct{ fs.FileInfo }

func (renamed) Name() string       { return SourceDir }
func (renamed) Mode() fs.FileMode  { return fs.ModeDir | 0o755 }
func (renamed) ModTime() time.Time { return time.Time{} }

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
