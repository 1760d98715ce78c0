package storage

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

func fstestContent(manifest string) fstest.MapFS {
	return fstest.MapFS{"manifests/m.yaml": {Data: []byte(manifest)}}
}

// TestFallbackLoaderErrors covers the failures of a download; the
// authenticated happy path is in TestHandlerAgainstAPIServer.
func TestFallbackLoaderErrors(t *testing.T) {
	dir, _ := contentDir(t)
	files := httptest.NewTLSServer(NewFileHandler(dir))
	t.Cleanup(files.Close)
	notGzip := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("<html>login page</html>"))
	}))
	t.Cleanup(notGzip.Close)

	token := func() (string, error) { return "t", nil }
	untrusting, err := NewHTTPClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		contentURL string
		client     *http.Client
		token      func() (string, error)
		wantErr    string
	}{
		{name: "no content URL", wantErr: "not stored locally and status.contentURL is empty"},
		{name: "not found", contentURL: files.URL + "/bundles/missing.tgz", client: files.Client(), token: token, wantErr: "server answered 404 Not Found: 404 page not found"},
		{name: "untrusted CA", contentURL: files.URL + "/bundles/good.tgz", client: untrusting, token: token, wantErr: "certificate signed by unknown authority"},
		{name: "body not gzip", contentURL: notGzip.URL + "/bundles/good.tgz", client: notGzip.Client(), token: token, wantErr: "reading gzip"},
		{name: "token unavailable", contentURL: files.URL + "/bundles/good.tgz", client: files.Client(),
			token: func() (string, error) { return "", errors.New("no token mounted") }, wantErr: "getting bearer token: no token mounted"},
		{name: "bad URL", contentURL: "::not a url", client: files.Client(), token: token, wantErr: "building request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bundle("good")
			b.Status.ContentURL = tt.contentURL
			l := NewFallbackLoader(&LocalDirectory{RootDirectory: t.TempDir()}, tt.client, tt.token)
			_, err := l.Load(context.Background(), b)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			}
			if tt.contentURL != "" && !strings.Contains(err.Error(), `bundle "good" from `+tt.contentURL) {
				t.Errorf("error %q does not name the bundle and URL", err)
			}
		})
	}
}

func TestFallbackLoaderDoesNotHideLocalCorruption(t *testing.T) {
	dir, _ := contentDir(t)
	files := httptest.NewTLSServer(NewFileHandler(dir))
	t.Cleanup(files.Close)

	local := &LocalDirectory{RootDirectory: t.TempDir()}
	if err := os.WriteFile(filepath.Join(local.RootDirectory, "good.tgz"), []byte("corrupt"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := bundle("good")
	b.Status.ContentURL = files.URL + "/bundles/good.tgz"
	_, err := NewFallbackLoader(local, files.Client(), nil).Load(context.Background(), b)
	if err == nil || !strings.Contains(err.Error(), "reading gzip") {
		t.Fatalf("got %v, want the local read error", err)
	}
}

func TestFallbackLoaderWithoutLocal(t *testing.T) {
	dir, _ := contentDir(t)
	files := httptest.NewTLSServer(NewFileHandler(dir))
	t.Cleanup(files.Close)
	b := bundle("good")
	b.Status.ContentURL = files.URL + "/bundles/good.tgz"
	fsys, err := NewFallbackLoader(nil, files.Client(), nil).Load(context.Background(), b)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	assertSameContent(t, nested(), fsys)
}

func TestTokenFromFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "token")
	if _, err := TokenFromFile(p)(); err == nil {
		t.Fatal("missing token file gave no error")
	}
	if err := os.WriteFile(p, []byte("  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := TokenFromFile(p)(); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("empty token file: got %v", err)
	}
	if err := os.WriteFile(p, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := TokenFromFile(p)(); err != nil || tok != "abc" {
		t.Fatalf("got %q, %v; want abc", tok, err)
	}
}

func TestNewHTTPClientRejectsBadCA(t *testing.T) {
	if _, err := NewHTTPClient([]byte("not pem")); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("got %v, want a no-PEM error", err)
	}
}
