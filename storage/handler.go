package storage

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

// BundlesPath is the URL path prefix the content handler serves; mount the
// handler there (mux.Handle(storage.BundlesPath, handler)).
const BundlesPath = "/bundles/"

// NewFileHandler serves the archives in dir at /bundles/<name>.tgz, with no
// authentication: wrap it with WithAuth (NewHandler does both).
//
// Only a regular file named after a valid bundle, directly inside dir, is
// ever served. Everything else (listings, "..", encoded slashes or dots,
// subdirectories, temporary files, symlinks) is a 404, so a request can
// neither escape dir nor read a partially written archive. GET and HEAD
// only; Range and conditional requests work.
func NewFileHandler(dir string) http.Handler {
	return &fileHandler{dir: dir}
}

type fileHandler struct {
	dir string
}

func (h *fileHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name, ok := requestedArchive(r)
	if !ok {
		http.NotFound(w, r)
		return
	}
	f, info, err := h.open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			http.NotFound(w, r)
			return
		}
		log.FromContext(r.Context()).Error(err, "Opening bundle content failed", "file", name)
		http.Error(w, "reading bundle content failed", http.StatusInternalServerError)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/gzip")
	http.ServeContent(w, r, name, info.ModTime(), f)
}

// requestedArchive returns the archive file name a request asks for, and
// whether it is one the handler may serve at all. It judges the raw path as
// well as the decoded one, so "%2e%2e" or "%2f" cannot sneak past.
func requestedArchive(r *http.Request) (string, bool) {
	if r.URL.EscapedPath() != r.URL.Path {
		// No valid archive name needs escaping.
		return "", false
	}
	name, ok := strings.CutPrefix(r.URL.Path, BundlesPath)
	if !ok {
		return "", false
	}
	bundle, ok := strings.CutSuffix(name, archiveSuffix)
	if !ok || validBundleName(bundle) != nil {
		return "", false
	}
	return name, true
}

// open opens dir/name only if it is a regular file, not a symlink. It stats
// the name before opening and the open file after, and insists both are the
// same file, so swapping in a symlink in between is caught too.
func (h *fileHandler) open(name string) (*os.File, fs.FileInfo, error) {
	root, err := os.OpenRoot(h.dir)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	before, err := root.Lstat(name)
	if err != nil {
		return nil, nil, err
	}
	if !before.Mode().IsRegular() {
		return nil, nil, fs.ErrNotExist
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, nil, err
	}
	after, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !after.Mode().IsRegular() || !os.SameFile(before, after) {
		f.Close()
		return nil, nil, fs.ErrNotExist
	}
	return f, after, nil
}
