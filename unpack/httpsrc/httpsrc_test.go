package httpsrc_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/rukpak-dev/rukpak/internal/testfiles"
	"k8s.io/apimachinery/pkg/api/equality"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/httpsrc"
)

const namespace = "rukpak-system"

func tarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, n := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[n]))}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, files[n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// server serves paths to bodies, behind basic auth user:pass for paths
// under /private/.
func server(t *testing.T, tlsOn bool, bodies map[string][]byte) *httptest.Server {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/private/") {
			if u, p, ok := r.BasicAuth(); !ok || u != "user" || p != "pass" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
		}
		if r.URL.Path == "/unavailable" {
			http.Error(w, "later", http.StatusServiceUnavailable)
			return
		}
		b, ok := bodies[strings.TrimPrefix(r.URL.Path, "/private")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	})
	var srv *httptest.Server
	if tlsOn {
		srv = httptest.NewUnstartedServer(h)
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes failed on purpose
		srv.StartTLS()
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	return srv
}

func bundleFor(url, secret string, insecure bool) *rukpakv1alpha1.Bundle {
	return &rukpakv1alpha1.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "test"},
		Spec: rukpakv1alpha1.BundleSpec{
			ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
			Source: rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeHTTP, HTTP: &rukpakv1alpha1.HTTPSource{
				URL:  url,
				Auth: &rukpakv1alpha1.Authorization{Secret: &rukpakv1alpha1.LocalObjectReference{Name: secret}, InsecureSkipVerify: insecure},
			}},
		},
	}
}

func newUnpacker(t *testing.T, limits unpack.Limits) *httpsrc.Unpacker {
	t.Helper()
	// The test servers listen on 127.0.0.1.
	secret := func(name, hosts string, data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Data: map[string][]byte{}}
		if hosts != "" {
			s.Annotations = map[string]string{rukpakv1alpha1.AnnotationAllowedHosts: hosts}
		}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	return httpsrc.New(unpack.Config{
		Reader: fake.NewClientBuilder().WithObjects(
			secret("good", "127.0.0.1", map[string]string{"username": "user", "password": "pass"}),
			secret("wrong", "127.0.0.1", map[string]string{"username": "user", "password": "nope"}),
			secret("nokeys", "127.0.0.1", map[string]string{"token": "x"}),
			secret("unannotated", "", map[string]string{"username": "user", "password": "pass"}),
			secret("elsewhere", "registry.example.com", map[string]string{"username": "user", "password": "pass"}),
		).Build(),
		Namespace: namespace,
		BaseDir:   t.TempDir(),
		Limits:    limits,
	})
}

// files lists a result's regular files with their contents.
func files(t *testing.T, fsys fs.FS) []string { return testfiles.List(t, fsys) }

func TestUnpack(t *testing.T) {
	archive := tarGz(t, map[string]string{"manifests/a.yaml": "a", "manifests/b.yaml": "b"})
	bodies := map[string][]byte{"/bundle.tgz": archive}
	plain := server(t, false, bodies)
	secure := server(t, true, bodies)
	want := []string{"manifests/a.yaml=a", "manifests/b.yaml=b"}

	for _, tc := range []struct {
		name, url, secret string
		insecure          bool
	}{
		{name: "http", url: plain.URL + "/bundle.tgz"},
		{name: "https insecureSkipVerify", url: secure.URL + "/bundle.tgz", insecure: true},
		{name: "basic auth", url: plain.URL + "/private/bundle.tgz", secret: "good"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bundleFor(tc.url, tc.secret, tc.insecure)
			res, err := newUnpacker(t, unpack.Limits{}).Unpack(t.Context(), b)
			if err != nil {
				t.Fatal(err)
			}
			if res.State != unpack.StateUnpacked {
				t.Fatalf("state %s", res.State)
			}
			if got := files(t, res.FS); !slices.Equal(got, want) {
				t.Errorf("files = %q, want %q", got, want)
			}
			if !equality.Semantic.DeepEqual(res.ResolvedSource.HTTP, b.Spec.Source.HTTP) {
				t.Errorf("resolved source %+v, want the spec's", res.ResolvedSource)
			}
			if want := fmt.Sprintf("archive sha256:%x", sha256.Sum256(archive)); res.Message != want {
				t.Errorf("message %q, want %q", res.Message, want)
			}
			if err := res.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := fs.ReadFile(res.FS, "manifests/a.yaml"); err == nil {
				t.Error("the content is still readable after Close")
			}
		})
	}
}

func TestUnpackErrors(t *testing.T) {
	var evil bytes.Buffer
	zw := gzip.NewWriter(&evil)
	tw := tar.NewWriter(zw)
	_ = tw.WriteHeader(&tar.Header{Name: "../x", Typeflag: tar.TypeReg, Size: 1})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	_ = zw.Close()

	srv := server(t, false, map[string][]byte{
		"/bundle.tgz": tarGz(t, map[string]string{"manifests/a.yaml": "a"}),
		"/plain.tar":  []byte("manifests/a.yaml is not an archive at all"),
		"/bomb.tgz":   tarGz(t, map[string]string{"manifests/bomb.yaml": string(make([]byte, 4<<20))}),
		"/evil.tgz":   evil.Bytes(),
	})
	secure := server(t, true, map[string][]byte{"/bundle.tgz": tarGz(t, map[string]string{"a": "a"})})
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	for _, tc := range []struct {
		name, url, secret string
		limits            unpack.Limits
		wantErr           string
		terminal          bool
	}{
		{name: "404", url: srv.URL + "/missing.tgz", wantErr: "GET " + srv.URL + "/missing.tgz: unexpected status \"404 Not Found\"", terminal: true},
		{name: "503", url: srv.URL + "/unavailable", wantErr: "GET " + srv.URL + "/unavailable: unexpected status \"503 Service Unavailable\""},
		{name: "no credentials", url: srv.URL + "/private/bundle.tgz", wantErr: "unexpected status \"401 Unauthorized\"", terminal: true},
		{name: "wrong credentials", url: srv.URL + "/private/bundle.tgz", secret: "wrong", wantErr: "GET " + srv.URL + "/private/bundle.tgz: unexpected status \"401 Unauthorized\"", terminal: true},
		{name: "missing secret", url: srv.URL + "/private/bundle.tgz", secret: "absent", wantErr: `auth secret "absent" not found in namespace "rukpak-system"`},
		{name: "secret without keys", url: srv.URL + "/private/bundle.tgz", secret: "nokeys", wantErr: "auth secret rukpak-system/nokeys must have username and password keys", terminal: true},
		{name: "not gzip", url: srv.URL + "/plain.tar", wantErr: "gzip: invalid header: the response body of GET " + srv.URL + "/plain.tar is not a gzip-compressed tar archive", terminal: true},
		{name: "decompression bomb", url: srv.URL + "/bomb.tgz", limits: unpack.Limits{MaxBytes: 1 << 20}, wantErr: "bundle content exceeds the limit of 1048576 bytes (at manifests/bomb.yaml)", terminal: true},
		{name: "escaping path", url: srv.URL + "/evil.tgz", wantErr: `path "../x" escapes the bundle root`, terminal: true},
		{name: "untrusted certificate", url: secure.URL + "/bundle.tgz", wantErr: "server certificate is not trusted", terminal: true},
		{name: "connection refused", url: closed.URL + "/bundle.tgz", wantErr: "connection refused"},
		{name: "bad URL", url: "ftp://example.com/x", wantErr: `invalid http source URL "ftp://example.com/x"`, terminal: true},
		{name: "password redacted", url: "http://user:hunter2@" + strings.TrimPrefix(srv.URL, "http://") + "/missing.tgz", wantErr: "user:xxxxx@", terminal: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUnpacker(t, tc.limits)
			_, err := u.Unpack(t.Context(), bundleFor(tc.url, tc.secret, false))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error leaks the password: %v", err)
			}
			if unpack.IsTerminal(err) != tc.terminal {
				t.Errorf("terminal = %v, want %v: %v", unpack.IsTerminal(err), tc.terminal, err)
			}
		})
	}
}

func TestUnpackCleansUpFailures(t *testing.T) {
	srv := server(t, false, map[string][]byte{"/bomb.tgz": tarGz(t, map[string]string{"a": string(make([]byte, 2<<20))})})
	base := t.TempDir()
	u := httpsrc.New(unpack.Config{BaseDir: base, Limits: unpack.Limits{MaxBytes: 1 << 20}})
	if _, err := u.Unpack(t.Context(), bundleFor(srv.URL+"/bomb.tgz", "", false)); err == nil {
		t.Fatal("want an error")
	}
	entries, err := os.ReadDir(base + "/http")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("left %d directories behind", len(entries))
	}
}
