package storage

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/rukpak-dev/rukpak/catalog/fbc"
)

func buildCatalog(t *testing.T, s *CatalogStore, name, extra string) *fbc.Index {
	t.Helper()
	fsys := fstest.MapFS{"c.json": {Data: []byte(`{"schema":"olm.package","name":"p","defaultChannel":"stable"}
{"schema":"olm.channel","package":"p","name":"stable","entries":[{"name":"p.v1"}]}
{"schema":"olm.bundle","package":"p","name":"p.v1","image":"example.com/p:1","properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.0.0"}}]}
{"schema":"olm.package","name":"q","defaultChannel":"stable"}
{"schema":"olm.channel","package":"q","name":"stable","entries":[{"name":"q.v1"}]}
{"schema":"olm.bundle","package":"q","name":"q.v1","image":"example.com/q:1","properties":[{"type":"olm.package","value":{"packageName":"q","version":"1.0.0"}}]}
` + extra)}}
	staged, err := s.Stage()
	if err != nil {
		t.Fatal(err)
	}
	x, err := fbc.Build(fsys, staged, fbc.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(name, staged, x.Digest); err != nil {
		t.Fatal(err)
	}
	return x
}

func TestCatalogStoreAndHandler(t *testing.T) {
	s := &CatalogStore{RootDirectory: t.TempDir(), BaseURL: "https://content.example"}
	first := buildCatalog(t, s, "cat", "")
	srv := httptest.NewServer(NewCatalogHandler(s))
	defer srv.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, body := get("/catalogs/cat/packages/q.jsonl")
	if code != http.StatusOK || strings.Count(body, "\n") != 3 || strings.Contains(body, `"p.v1"`) || !strings.Contains(body, `"q.v1"`) {
		t.Fatalf("package q: %d\n%s", code, body)
	}
	if code, body = get("/catalogs/cat/all.jsonl"); code != http.StatusOK || strings.Count(body, "\n") != 6 {
		t.Fatalf("all.jsonl: %d\n%s", code, body)
	}
	if code, body = get("/catalogs/cat/index.json"); code != http.StatusOK || !strings.Contains(body, first.Digest) {
		t.Fatalf("index.json: %d\n%s", code, body)
	}
	// A new version is swapped in whole; the old one is removed.
	second := buildCatalog(t, s, "cat", `{"schema":"example.com/extra"}`+"\n")
	if code, body = get("/catalogs/cat/index.json"); code != http.StatusOK || !strings.Contains(body, second.Digest) {
		t.Fatalf("index.json after the swap: %d\n%s", code, body)
	}
	entries, _ := os.ReadDir(filepath.Join(s.RootDirectory, "catalogs", "cat"))
	if len(entries) != 2 { // current and one version
		t.Fatalf("versions left: %v", entries)
	}
	p, err := s.ReadPackage("cat", "p")
	if err != nil || len(p.Bundles) != 1 || p.Bundles[0].Version != "1.0.0" || p.DefaultChannel != "stable" {
		t.Fatalf("ReadPackage: %+v, %v", p, err)
	}
	if _, err := s.ReadPackage("cat", "nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadPackage of a missing package: %v", err)
	}
	if s.URLFor("cat") != "https://content.example/catalogs/cat/" {
		t.Fatalf("URLFor: %s", s.URLFor("cat"))
	}
	// A secret beside the storage directory, for traversal attempts.
	if err := os.WriteFile(filepath.Join(s.RootDirectory, "catalogs", "cat", "secret"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		"/catalogs/", "/catalogs/cat", "/catalogs/cat/", "/catalogs/cat/current", "/catalogs/cat/secret",
		"/catalogs/cat/../cat/index.json", "/catalogs/cat/%2e%2e/secret", "/catalogs/cat%2findex.json",
		"/catalogs/cat/packages/", "/catalogs/cat/packages/nope.jsonl", "/catalogs/cat/packages/p.json",
		"/catalogs/cat/packages/../index.json", "/catalogs/cat/packages/%2e%2e%2fsecret.jsonl",
		"/catalogs/other/index.json", "/catalogs/.staging-1/index.json", "/catalogs/cat/" + second.Digest[7:] + "/all.jsonl",
	} {
		if code, _ := get(path); code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, code)
		}
	}
	resp, err := http.Post(srv.URL+"/catalogs/cat/index.json", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
	if err := s.Delete("cat"); err != nil {
		t.Fatal(err)
	}
	if code, _ := get("/catalogs/cat/index.json"); code != http.StatusNotFound {
		t.Fatalf("after Delete: %d", code)
	}
}
