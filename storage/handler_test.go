package storage

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// contentDir is a storage directory holding one good archive plus every
// kind of thing the handler must never serve.
func contentDir(t *testing.T) (string, []byte) {
	t.Helper()
	s := &LocalDirectory{RootDirectory: t.TempDir()}
	if err := s.Store(context.Background(), bundle("good"), nested()); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(s.RootDirectory, "good.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	dir := s.RootDirectory
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, ".good.tgz.tmp-1234"), good[:10], 0o600))
	must(os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not an archive"), 0o644))
	must(os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "sub", "x.tgz"), good, 0o644))
	must(os.Mkdir(filepath.Join(dir, "dir.tgz"), 0o755))
	must(os.Symlink("good.tgz", filepath.Join(dir, "link.tgz")))
	must(os.Symlink("/etc/passwd", filepath.Join(dir, "passwd.tgz")))
	// A secret next to the storage directory, for traversal attempts.
	must(os.WriteFile(filepath.Join(filepath.Dir(dir), "x"), []byte("secret"), 0o644))
	return dir, good
}

// traversalPaths must all be 404, whoever asks.
var traversalPaths = []string{
	"/bundles/",
	"/bundles",
	"/bundles/../x",
	"/bundles/%2e%2e/x",
	"/bundles/..%2fx",
	"/bundles/%2E%2E%2Fx",
	"/bundles/sub/x.tgz",
	"/bundles/sub%2fx.tgz",
	"/bundles//etc/passwd",
	"/bundles/%2fetc%2fpasswd",
	"/bundles/.good.tgz.tmp-1234",
	"/bundles/link.tgz",
	"/bundles/passwd.tgz",
	"/bundles/dir.tgz",
	"/bundles/notes.txt",
	"/bundles/missing.tgz",
	"/bundles/GOOD.tgz",
	"/bundles/good.tgz%00",
	"/bundles/good.tgz/",
	"/bundles/good",
	"/other/good.tgz",
	"/good.tgz",
}

func TestFileHandler(t *testing.T) {
	dir, good := contentDir(t)
	h := NewFileHandler(dir)

	for _, p := range traversalPaths {
		t.Run(p, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
			if rec.Code != http.StatusNotFound {
				t.Fatalf("GET %s: status %d, want 404 (body %q)", p, rec.Code, rec.Body.String())
			}
			if strings.Contains(rec.Body.String(), "secret") {
				t.Fatalf("GET %s leaked a file outside the directory", p)
			}
		})
	}

	tests := []struct {
		name, method, rangeHeader string
		wantStatus                int
		wantBody                  []byte
	}{
		{name: "get", method: http.MethodGet, wantStatus: http.StatusOK, wantBody: good},
		{name: "head", method: http.MethodHead, wantStatus: http.StatusOK, wantBody: []byte{}},
		{name: "range", method: http.MethodGet, rangeHeader: "bytes=0-9", wantStatus: http.StatusPartialContent, wantBody: good[:10]},
		{name: "post", method: http.MethodPost, wantStatus: http.StatusMethodNotAllowed},
		{name: "delete", method: http.MethodDelete, wantStatus: http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, "/bundles/good.tgz", nil)
			if tt.rangeHeader != "" {
				req.Header.Set("Range", tt.rangeHeader)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d", rec.Code, tt.wantStatus)
			}
			if tt.wantBody != nil && rec.Body.String() != string(tt.wantBody) {
				t.Fatalf("body of %d bytes, want %d bytes", rec.Body.Len(), len(tt.wantBody))
			}
			if tt.wantStatus == http.StatusOK && rec.Header().Get("Content-Type") != "application/gzip" {
				t.Errorf("Content-Type %q, want application/gzip", rec.Header().Get("Content-Type"))
			}
		})
	}
}

func TestFileHandlerMissingDirectory(t *testing.T) {
	h := NewFileHandler(filepath.Join(t.TempDir(), "not-yet"))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/bundles/good.tgz", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("status %d, want 404", rec.Code)
	}
}
