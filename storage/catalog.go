package storage

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/rukpak-dev/rukpak/catalog/fbc"
)

// CatalogsPath is the URL path prefix of stored catalogs:
// /catalogs/<name>/index.json, /catalogs/<name>/all.jsonl and
// /catalogs/<name>/packages/<package>.jsonl.
const CatalogsPath = "/catalogs/"

// catalogsDir is the directory of RootDirectory that holds catalogs.
const catalogsDir = "catalogs"

// currentFile names the version directory a catalog serves.
const currentFile = "current"

// CatalogStore keeps one document per catalog (fbc.DocumentFile and its
// fbc.IndexFile) under <RootDirectory>/catalogs/<name>/<digest>/. A new
// version is built in a staging directory and swapped in by renaming a
// pointer file, so readers see the old or the new document, never a mix;
// a reader that opened the old one keeps reading it.
type CatalogStore struct {
	RootDirectory string
	// BaseURL is the content service's URL; a catalog is served at
	// <BaseURL>/catalogs/<name>/.
	BaseURL string
}

func (s *CatalogStore) root() string { return filepath.Join(s.RootDirectory, catalogsDir) }

// Stage returns a new empty directory to build a catalog document in, for
// Commit or os.RemoveAll.
func (s *CatalogStore) Stage() (string, error) {
	if err := os.MkdirAll(s.root(), 0o755); err != nil {
		return "", fmt.Errorf("creating catalog storage: %w", err)
	}
	dir, err := os.MkdirTemp(s.root(), ".staging-")
	if err != nil {
		return "", fmt.Errorf("creating catalog staging directory: %w", err)
	}
	return dir, nil
}

// RemoveStaleStaging removes staging directories older than olderThan,
// left by a process that stopped while building.
func (s *CatalogStore) RemoveStaleStaging(olderThan time.Duration) error {
	entries, err := os.ReadDir(s.root())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".staging-") {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > olderThan {
			errs = append(errs, os.RemoveAll(filepath.Join(s.root(), e.Name())))
		}
	}
	return errors.Join(errs...)
}

// Commit makes the document staged (a Stage directory) with digest
// ("sha256:<hex>") the one name serves, and removes older versions.
func (s *CatalogStore) Commit(name, staged, digest string) error {
	if err := validBundleName(name); err != nil {
		return err
	}
	version, err := versionOf(digest)
	if err != nil {
		return err
	}
	dir := filepath.Join(s.root(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating catalog directory: %w", err)
	}
	target := filepath.Join(dir, version)
	if _, err := os.Stat(target); err == nil {
		// The same content is there already.
		if err := os.RemoveAll(staged); err != nil {
			return err
		}
	} else if err := os.Rename(staged, target); err != nil {
		return fmt.Errorf("storing catalog %q: %w", name, err)
	}
	tmp := filepath.Join(dir, ".current-"+version)
	if err := os.WriteFile(tmp, []byte(version), 0o644); err != nil {
		return fmt.Errorf("storing catalog %q: %w", name, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, currentFile)); err != nil {
		return fmt.Errorf("storing catalog %q: %w", name, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() && e.Name() != version {
			// Readers that opened a file of it keep reading it.
			errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

func versionOf(digest string) (string, error) {
	hexDigest, ok := strings.CutPrefix(digest, "sha256:")
	if b, err := hex.DecodeString(hexDigest); !ok || err != nil || len(b) != 32 {
		return "", fmt.Errorf("invalid catalog digest %q", digest)
	}
	return hexDigest, nil
}

// Dir returns the directory of the document name serves; an error wrapping
// fs.ErrNotExist when none is stored.
func (s *CatalogStore) Dir(name string) (string, error) {
	if err := validBundleName(name); err != nil {
		return "", fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	dir := filepath.Join(s.root(), name)
	v, err := os.ReadFile(filepath.Join(dir, currentFile))
	if err != nil {
		return "", err
	}
	if _, err := versionOf("sha256:" + string(v)); err != nil {
		return "", err
	}
	return filepath.Join(dir, string(v)), nil
}

// Index reads the index of the document name serves.
func (s *CatalogStore) Index(name string) (*fbc.Index, error) {
	dir, err := s.Dir(name)
	if err != nil {
		return nil, err
	}
	return fbc.ReadIndex(dir)
}

// ReadPackage reads one package of the catalog name serves.
func (s *CatalogStore) ReadPackage(name, pkg string) (*fbc.Package, error) {
	for attempt := 0; ; attempt++ {
		dir, err := s.Dir(name)
		if err != nil {
			return nil, err
		}
		x, err := fbc.ReadIndex(dir)
		if err == nil {
			var p *fbc.Package
			if p, err = fbc.ReadPackage(dir, x, pkg); err == nil || !errors.Is(err, fs.ErrNotExist) || attempt > 0 {
				return p, err
			}
		} else if !errors.Is(err, fs.ErrNotExist) || attempt > 0 {
			return nil, err
		}
		// Swapped while reading: read the new version.
	}
}

// errCatalogNotStored: the store holds no document of the catalog.
var errCatalogNotStored = fmt.Errorf("catalog not stored here: %w", fs.ErrNotExist)

// OpenPackage opens package pkg of the document name serves, as the
// content service serves packages/<pkg>.jsonl: an error wrapping
// fs.ErrNotExist when the document has no such package, and
// errCatalogNotStored (which wraps it too) when the store holds no
// document of name.
func (s *CatalogStore) OpenPackage(name, pkg string) (io.ReadCloser, error) {
	for attempt := 0; ; attempt++ {
		dir, err := s.Dir(name)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("catalog %q: %w", name, errCatalogNotStored)
		}
		if err != nil {
			return nil, err
		}
		rc, err := openPackage(dir, pkg)
		if err == nil || !errors.Is(err, fs.ErrNotExist) || attempt > 0 {
			return rc, err
		}
		// Swapped while reading: read the new version.
	}
}

func openPackage(dir, pkg string) (io.ReadCloser, error) {
	x, err := fbc.ReadIndex(dir)
	if err != nil {
		return nil, err
	}
	pi, ok := x.Package(pkg)
	if !ok {
		return nil, fmt.Errorf("package %q: %w", pkg, fs.ErrNotExist)
	}
	f, err := os.Open(filepath.Join(dir, fbc.DocumentFile))
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, pi.Offset, pi.Length), f}, nil
}

// Delete removes every stored version of name.
func (s *CatalogStore) Delete(name string) error {
	if err := validBundleName(name); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(s.root(), name))
}

// URLFor is where name's document is served.
func (s *CatalogStore) URLFor(name string) string {
	return s.BaseURL + CatalogsPath + name + "/"
}

// NewCatalogHandler serves the documents of s at CatalogsPath, with no
// authentication: wrap it with WithAuth. Only the three paths of a stored
// catalog are served (a package only if the index names it); everything
// else is a 404. GET and HEAD only; Range requests work.
func NewCatalogHandler(s *CatalogStore) http.Handler {
	return &catalogHandler{s: s}
}

type catalogHandler struct{ s *CatalogStore }

func (h *catalogHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.EscapedPath() != r.URL.Path {
		http.NotFound(w, r)
		return
	}
	rest, _ := strings.CutPrefix(r.URL.Path, CatalogsPath)
	name, file, ok := strings.Cut(rest, "/")
	if !ok || validBundleName(name) != nil {
		http.NotFound(w, r)
		return
	}
	for attempt := 0; ; attempt++ {
		err := h.serve(w, r, name, file)
		if err == nil {
			return
		}
		if !errors.Is(err, fs.ErrNotExist) {
			log.FromContext(r.Context()).Error(err, "Reading catalog failed", "catalog", name, "file", file)
			http.Error(w, "reading catalog failed", http.StatusInternalServerError)
			return
		}
		if attempt > 0 {
			http.NotFound(w, r)
			return
		}
		// Perhaps swapped between reading the pointer and opening: again.
	}
}

// serve writes file of name's current document; fs.ErrNotExist when there
// is none (nothing has been written then).
func (h *catalogHandler) serve(w http.ResponseWriter, r *http.Request, name, file string) error {
	dir, err := h.s.Dir(name)
	if err != nil {
		return err
	}
	var pkg string
	switch file {
	case fbc.IndexFile:
		w.Header().Set("Content-Type", "application/json")
	case fbc.DocumentFile:
		w.Header().Set("Content-Type", "application/jsonl")
	default:
		p, ok := strings.CutPrefix(file, "packages/")
		if !ok {
			return fs.ErrNotExist
		}
		if pkg, ok = strings.CutSuffix(p, ".jsonl"); !ok || pkg == "" {
			return fs.ErrNotExist
		}
	}
	var x *fbc.Index
	if pkg != "" {
		if x, err = fbc.ReadIndex(dir); err != nil {
			return err
		}
	}
	diskName := file
	if pkg != "" {
		diskName = fbc.DocumentFile
	}
	// The document directory holds only regular files this process wrote.
	f, err := os.Open(filepath.Join(dir, diskName))
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	var content io.ReadSeeker = f
	if pkg != "" {
		pi, ok := x.Package(pkg)
		if !ok {
			return fs.ErrNotExist
		}
		w.Header().Set("Content-Type", "application/jsonl")
		content = io.NewSectionReader(f, pi.Offset, pi.Length)
	}
	http.ServeContent(w, r, file, info.ModTime(), content)
	return nil
}
