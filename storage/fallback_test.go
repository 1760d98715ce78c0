package storage

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/rukpak-dev/rukpak/unpack"
)

func fstestContent(manifest string) fstest.MapFS {
	return fstest.MapFS{"manifests/m.yaml": {Data: []byte(manifest)}}
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// jwt is an unsigned token with the given audiences: the loader only reads
// the claim, the content server's TokenReview verifies it.
func jwt(aud ...string) string {
	enc := base64.RawURLEncoding.EncodeToString
	auds := `"` + strings.Join(aud, `","`) + `"`
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(`{"aud":[`+auds+`],"sub":"system:serviceaccount:rukpak-system:rukpak-provisioner"}`)) + ".c2ln"
}

// recorder is a server that records every request it gets.
type recorder struct {
	mu   sync.Mutex
	reqs []*http.Request
	next http.Handler
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req.Clone(context.Background()))
	r.mu.Unlock()
	r.next.ServeHTTP(w, req)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

func (r *recorder) tokens() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, req := range r.reqs {
		if a := req.Header.Get("Authorization"); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// TestFallbackLoaderIgnoresStatusURL is the escalation through
// bundles/status: a status pointing at a foreign server (https, plain http,
// or a redirect from the real service) is never contacted, no token leaves,
// and bytes that do not hash to status.contentDigest are refused.
func TestFallbackLoaderIgnoresStatusURL(t *testing.T) {
	dir, good := contentDir(t)
	evilDir := t.TempDir()
	evil := &LocalDirectory{RootDirectory: evilDir}
	if err := evil.Store(context.Background(), bundle("good"), fstestContent("kind: ClusterRoleBinding\n")); err != nil {
		t.Fatal(err)
	}
	tampered, err := os.ReadFile(filepath.Join(evilDir, "good.tgz"))
	if err != nil {
		t.Fatal(err)
	}

	service := &recorder{next: NewFileHandler(dir)}
	serviceSrv := httptest.NewTLSServer(service)
	t.Cleanup(serviceSrv.Close)
	foreign := &recorder{next: NewFileHandler(evilDir)}
	foreignTLS := httptest.NewTLSServer(foreign)
	t.Cleanup(foreignTLS.Close)
	foreignPlain := httptest.NewServer(foreign)
	t.Cleanup(foreignPlain.Close)
	// The real service (or a replica of it) answering with a redirect.
	redirecting := httptest.NewTLSServer(http.RedirectHandler(foreignTLS.URL+"/bundles/good.tgz", http.StatusFound))
	t.Cleanup(redirecting.Close)
	tamperedSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(tampered) }))
	t.Cleanup(tamperedSrv.Close)

	// One client trusting every test server's CA (they share httptest's).
	client, err := NewHTTPClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	client.Transport = serviceSrv.Client().Transport
	token := jwt(DefaultContentAudience)

	tests := []struct {
		name       string
		base       string
		contentURL string
		digest     string
		wantErr    string // "" = loads the service's content
	}{
		{name: "status points at a foreign https server", base: serviceSrv.URL, contentURL: foreignTLS.URL + "/bundles/good.tgz", digest: digestOf(good)},
		{name: "status points at plain http", base: serviceSrv.URL, contentURL: foreignPlain.URL + "/bundles/good.tgz", digest: digestOf(good)},
		{name: "status names the foreign content's digest", base: serviceSrv.URL, contentURL: foreignTLS.URL + "/bundles/good.tgz", digest: digestOf(tampered),
			wantErr: "content digest " + digestOf(good) + " does not match status.contentDigest " + digestOf(tampered) + ": refusing it"},
		{name: "service redirects", base: redirecting.URL, contentURL: foreignTLS.URL + "/bundles/good.tgz", digest: digestOf(good),
			wantErr: `loading content of bundle "good" from ` + redirecting.URL + "/bundles/good.tgz: server answered 302 Found"},
		{name: "tampered download", base: tamperedSrv.URL, digest: digestOf(good),
			wantErr: "content digest " + digestOf(tampered) + " does not match status.contentDigest " + digestOf(good) + ": refusing it"},
		{name: "no digest in status", base: serviceSrv.URL, contentURL: foreignTLS.URL + "/bundles/good.tgz",
			wantErr: `loading content of bundle "good" from ` + serviceSrv.URL + "/bundles/good.tgz: status.contentDigest is empty, so downloaded content cannot be verified"},
		{name: "malformed digest", base: serviceSrv.URL, digest: "sha256:\x1b[2Jnope",
			wantErr: `status.contentDigest "sha256: [2Jnope" is not sha256:<64 hex digits>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := service.count()
			b := bundle("good")
			b.Status.ContentURL = tt.contentURL
			b.Status.ContentDigest = tt.digest
			l, err := NewFallbackLoader(&LocalDirectory{RootDirectory: t.TempDir()}, tt.base, client, func() (string, error) { return token, nil })
			if err != nil {
				t.Fatal(err)
			}
			l.Audience = DefaultContentAudience
			fsys, err := l.Load(context.Background(), b)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				assertSameContent(t, nested(), fsys)
				if service.count() != before+1 {
					t.Errorf("the content service got %d requests, want 1", service.count()-before)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			}
			if n := foreign.count(); n != 0 {
				t.Fatalf("the foreign server was contacted %d times (tokens: %q)", n, foreign.tokens())
			}
		})
	}
	if got := service.tokens(); len(got) == 0 || got[0] != "Bearer "+token {
		t.Errorf("the content service got tokens %q, want the content-audience token", got)
	}
}

func TestFallbackLoaderErrors(t *testing.T) {
	dir, good := contentDir(t)
	files := &recorder{next: NewFileHandler(dir)}
	filesSrv := httptest.NewTLSServer(files)
	t.Cleanup(filesSrv.Close)
	empty := httptest.NewTLSServer(NewFileHandler(t.TempDir()))
	t.Cleanup(empty.Close)
	notGzipBody := []byte("<html>login page</html>")
	notGzip := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(notGzipBody) }))
	t.Cleanup(notGzip.Close)
	huge := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(make([]byte, 4096))
	}))
	t.Cleanup(huge.Close)
	noisy404 := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(strings.Repeat("x", 1<<20)))
	}))
	t.Cleanup(noisy404.Close)

	token := func() (string, error) { return jwt(DefaultContentAudience), nil }
	untrusting, err := NewHTTPClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		base    string
		digest  string
		client  *http.Client
		token   func() (string, error)
		limits  unpack.Limits
		wantErr string
	}{
		{name: "not found", base: empty.URL, digest: digestOf(good), client: empty.Client(), token: token, wantErr: "server answered 404 Not Found: 404 page not found"},
		{name: "remote body cut to an excerpt", base: noisy404.URL, digest: digestOf(good), client: noisy404.Client(), token: token, wantErr: "server answered 404 Not Found: " + unpack.Sanitize(strings.Repeat("x", 1<<20))},
		{name: "untrusted CA", base: filesSrv.URL, digest: digestOf(good), client: untrusting, token: token, wantErr: "certificate signed by unknown authority"},
		{name: "body not gzip", base: notGzip.URL, digest: digestOf(notGzipBody), client: notGzip.Client(), token: token, wantErr: "reading gzip"},
		{name: "body over the fetch limit", base: huge.URL, digest: digestOf(good), client: huge.Client(), token: token, limits: unpack.Limits{MaxFetchBytes: 1024}, wantErr: "content is larger than 1024 bytes"},
		{name: "token unavailable", base: filesSrv.URL, digest: digestOf(good), client: filesSrv.Client(),
			token: func() (string, error) { return "", errors.New("no token mounted") }, wantErr: "getting bearer token: no token mounted"},
		{name: "API server token never sent", base: filesSrv.URL, digest: digestOf(good), client: filesSrv.Client(),
			token:   func() (string, error) { return jwt("https://kubernetes.default.svc.cluster.local"), nil },
			wantErr: `refusing to send the bearer token: its audiences ["https://kubernetes.default.svc.cluster.local"] do not include "content.core.rukpak.io"`},
		{name: "opaque token never sent", base: filesSrv.URL, digest: digestOf(good), client: filesSrv.Client(),
			token: func() (string, error) { return "abc", nil }, wantErr: `refusing to send the bearer token: it is not a JWT bound to audience "content.core.rukpak.io"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := files.count()
			b := bundle("good")
			b.Status.ContentDigest = tt.digest
			l, err := NewFallbackLoader(&LocalDirectory{RootDirectory: t.TempDir()}, tt.base, tt.client, tt.token)
			if err != nil {
				t.Fatal(err)
			}
			l.Audience = DefaultContentAudience
			l.Limits = tt.limits
			_, err = l.Load(context.Background(), b)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), `bundle "good" from `+tt.base+"/bundles/good.tgz") {
				t.Errorf("error %q does not name the bundle and URL", err)
			}
			if strings.HasPrefix(tt.wantErr, "refusing") && files.count() != before {
				t.Error("a refused token still reached the server")
			}
		})
	}
}

func TestNewFallbackLoaderBaseURL(t *testing.T) {
	for _, base := range []string{"http://rukpak-core.rukpak-system.svc", "rukpak-core", "https://", "https://u:p@host", "https://host/?q=1", "::"} {
		if _, err := NewFallbackLoader(nil, base, nil, nil); err == nil || !strings.Contains(err.Error(), "content service URL") {
			t.Errorf("base %q: got %v, want a content service URL error", base, err)
		}
	}
	l, err := NewFallbackLoader(nil, "https://rukpak-core.rukpak-system.svc/", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.ClassBaseURLs = map[string]string{"core-rukpak-io-registry": "https://registry.rukpak-system.svc:8443/x"}
	for class, want := range map[string]string{
		"core-rukpak-io-plain":    "https://rukpak-core.rukpak-system.svc/bundles/b.tgz",
		"core-rukpak-io-registry": "https://registry.rukpak-system.svc:8443/x/bundles/b.tgz",
	} {
		b := bundle("b")
		b.Spec.ProvisionerClassName = class
		b.Status.ContentURL = "http://evil.example.com/b.tgz"
		if got, err := l.urlFor(b); err != nil || got != want {
			t.Errorf("class %s: got %q, %v; want %q", class, got, err, want)
		}
	}
}

func TestFallbackLoaderDoesNotHideLocalCorruption(t *testing.T) {
	dir, good := contentDir(t)
	files := httptest.NewTLSServer(NewFileHandler(dir))
	t.Cleanup(files.Close)

	local := &LocalDirectory{RootDirectory: t.TempDir()}
	if err := os.WriteFile(filepath.Join(local.RootDirectory, "good.tgz"), []byte("corrupt"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := bundle("good")
	b.Status.ContentDigest = digestOf(good)
	l, err := NewFallbackLoader(local, files.URL, files.Client(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Load(context.Background(), b); err == nil || !strings.Contains(err.Error(), "reading gzip") {
		t.Fatalf("got %v, want the local read error", err)
	}
}

func TestFallbackLoaderWithoutLocal(t *testing.T) {
	dir, good := contentDir(t)
	files := httptest.NewTLSServer(NewFileHandler(dir))
	t.Cleanup(files.Close)
	b := bundle("good")
	b.Status.ContentDigest = digestOf(good)
	l, err := NewFallbackLoader(nil, files.URL, files.Client(), nil)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := l.Load(context.Background(), b)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	assertSameContent(t, nested(), fsys)
}

func TestLocalDirectoryDigest(t *testing.T) {
	dir, good := contentDir(t)
	s := &LocalDirectory{RootDirectory: dir}
	if got, err := s.Digest(context.Background(), bundle("good")); err != nil || got != digestOf(good) {
		t.Fatalf("got %q, %v; want %s", got, err, digestOf(good))
	}
	if _, err := s.Digest(context.Background(), bundle("missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing content: got %v", err)
	}
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
