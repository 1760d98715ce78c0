package storage

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

func TestCatalogClientOpenPackage(t *testing.T) {
	var gotAuth, gotPath string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotPath = r.Header.Get("Authorization"), r.URL.Path
		switch r.URL.Path {
		case "/prefix/catalogs/ops/packages/kube-green.jsonl":
			_, _ = io.WriteString(w, "{}\n")
		case "/prefix/catalogs/ops/packages/moved.jsonl":
			http.Redirect(w, r, "https://elsewhere.example/", http.StatusFound)
		case "/prefix/catalogs/ops/packages/broken.jsonl":
			http.Error(w, "reading catalog failed", http.StatusInternalServerError)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	token := jwt(DefaultContentAudience)
	c := &CatalogClient{BaseURL: srv.URL + "/prefix/", Client: srv.Client(), Token: func() (string, error) { return token, nil }, Audience: DefaultContentAudience}
	ctx := context.Background()

	body, err := c.OpenPackage(ctx, "ops", "kube-green")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(body)
	body.Close()
	if string(data) != "{}\n" || gotAuth != "Bearer "+token || gotPath != "/prefix/catalogs/ops/packages/kube-green.jsonl" {
		t.Fatalf("body %q, auth %q, path %q", data, gotAuth, gotPath)
	}
	for _, tc := range []struct{ catalog, pkg, want string }{
		{"ops", "absent", "file does not exist"},
		{"ops", "moved", "302 Found"},
		{"ops", "broken", "500 Internal Server Error: reading catalog failed"},
		{"../etc", "p", "catalog name"},
	} {
		_, err := c.OpenPackage(ctx, tc.catalog, tc.pkg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s/%s: %v, want %q", tc.catalog, tc.pkg, err, tc.want)
		}
		if tc.pkg == "absent" && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("absent package: %v does not wrap fs.ErrNotExist", err)
		}
	}

	// A token of another audience is never sent.
	gotAuth = ""
	c.Token = func() (string, error) { return jwt("https://kubernetes.default.svc"), nil }
	if _, err := c.OpenPackage(ctx, "ops", "kube-green"); err == nil || !strings.Contains(err.Error(), "refusing to send the bearer token") || gotAuth != "" {
		t.Fatalf("foreign audience: %v, sent %q", err, gotAuth)
	}
	// Nor is anything sent over plain http.
	c.BaseURL = strings.Replace(srv.URL, "https://", "http://", 1)
	if _, err := c.OpenPackage(ctx, "ops", "kube-green"); err == nil || !strings.Contains(err.Error(), "must be https") {
		t.Fatalf("http base: %v", err)
	}
}

// The process that stores a catalog reads it from its store, as served and
// with no request; a catalog it does not store is read over HTTPS. A token
// that cannot be read is an error, never a package the catalog lacks (which
// a resolver would remember as absent).
func TestCatalogClientLocalAndTokenErrors(t *testing.T) {
	s := &CatalogStore{RootDirectory: t.TempDir(), BaseURL: "https://content.example"}
	buildCatalog(t, s, "cat", "")
	var requests int
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		http.NotFound(w, r)
	}))
	defer srv.Close()
	c := &CatalogClient{BaseURL: srv.URL, Client: srv.Client(), Local: s,
		Token: TokenFromFile(filepath.Join(t.TempDir(), "no-token"))}
	ctx := context.Background()

	body, err := c.OpenPackage(ctx, "cat", "q")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(body)
	body.Close()
	served := httptest.NewServer(NewCatalogHandler(s))
	defer served.Close()
	resp, err := http.Get(served.URL + "/catalogs/cat/packages/q.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(data) != string(want) || len(data) == 0 {
		t.Fatalf("local read %q, served %q", data, want)
	}
	if _, err := c.OpenPackage(ctx, "cat", "nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a package the stored catalog lacks: %v", err)
	}
	if requests != 0 {
		t.Fatalf("%d requests for catalogs stored here", requests)
	}
	_, err = c.OpenPackage(ctx, "elsewhere", "q")
	if err == nil || errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "getting bearer token") {
		t.Fatalf("unreadable token: %v (must not read as a missing package)", err)
	}
}
