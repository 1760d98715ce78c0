package testregistry_test

import (
	"archive/tar"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/rukpak-dev/rukpak/internal/testregistry"
)

func TestPushPull(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []testregistry.Option
	}{
		{"anonymous", nil},
		{"basic auth", []testregistry.Option{testregistry.WithBasicAuth("user", "secret")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := testregistry.New(t, tc.opts...)
			img := testregistry.Image(t,
				testregistry.Layer(t, map[string]string{"manifests/a.yaml": "a", "manifests/b.yaml": "b"}),
				testregistry.Layer(t, map[string]string{"manifests/.wh.b.yaml": ""}),
			)
			digestRef := reg.MustPush(t, reg.Ref("bundle:v1"), img)

			ref, err := name.ParseReference(digestRef)
			if err != nil {
				t.Fatal(err)
			}
			pulled, err := remote.Image(ref, reg.RemoteOptions()...)
			if err != nil {
				t.Fatal(err)
			}
			layers, err := pulled.Layers()
			if err != nil {
				t.Fatal(err)
			}
			if len(layers) != 2 {
				t.Fatalf("got %d layers, want 2", len(layers))
			}
			var names []string
			rc := mutate.Extract(pulled) // flattens, honouring whiteouts
			defer rc.Close()
			tr := tar.NewReader(rc)
			for {
				hdr, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if hdr.Typeflag == tar.TypeReg {
					names = append(names, hdr.Name)
				}
			}
			if len(names) != 1 || names[0] != "manifests/a.yaml" {
				t.Errorf("flattened files = %q, want [manifests/a.yaml]", names)
			}
			if reg.BlobPulls() == 0 {
				t.Error("BlobPulls did not count the pull")
			}
		})
	}
}

func TestBasicAuthRejectsAnonymous(t *testing.T) {
	reg := testregistry.New(t, testregistry.WithBasicAuth("user", "secret"))
	ref, err := name.ParseReference(reg.Ref("bundle:v1"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = remote.Head(ref, remote.WithTransport(reg.Transport()))
	var terr *transport.Error
	if !errors.As(err, &terr) || terr.StatusCode != http.StatusUnauthorized {
		t.Fatalf("got %v, want a 401", err)
	}
}

func TestUntrustedWithoutCA(t *testing.T) {
	reg := testregistry.New(t)
	resp, err := http.Get("https://" + reg.Host + "/v2/")
	if err == nil {
		resp.Body.Close()
		t.Fatal("the system roots trusted the test CA")
	}
}

func TestWithHost(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []testregistry.Option
		prefix string // of Host
	}{
		{"default", nil, "127.0.0.1:"},
		{"explicit 127.0.0.1", []testregistry.Option{testregistry.WithHost("127.0.0.1")}, "127.0.0.1:"},
		{"localhost", []testregistry.Option{testregistry.WithHost("localhost")}, "localhost:"},
		{"localhost with basic auth", []testregistry.Option{testregistry.WithHost("localhost"), testregistry.WithBasicAuth("u", "p")}, "localhost:"},
		{"::1", []testregistry.Option{testregistry.WithHost("::1")}, "[::1]:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg, err := testregistry.Start(tc.opts...)
			if err != nil {
				if tc.prefix == "[::1]:" {
					t.Skipf("no IPv6 loopback here: %v", err)
				}
				t.Fatal(err)
			}
			t.Cleanup(reg.Close)
			if !strings.HasPrefix(reg.Host, tc.prefix) {
				t.Fatalf("Host = %q, want prefix %q", reg.Host, tc.prefix)
			}
			ref := reg.Ref("bundle:v1")
			if !strings.HasPrefix(ref, tc.prefix) {
				t.Fatalf("Ref = %q, want prefix %q", ref, tc.prefix)
			}

			// Push and pull through that name, trusting only the CA: the
			// certificate must be valid for it.
			img := testregistry.Image(t, testregistry.Layer(t, map[string]string{"manifests/a.yaml": "a"}))
			digestRef := reg.MustPush(t, ref, img)
			if !strings.HasPrefix(digestRef, tc.prefix) {
				t.Fatalf("digest reference %q, want prefix %q", digestRef, tc.prefix)
			}
			parsed, err := name.ParseReference(digestRef)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := remote.Image(parsed, reg.RemoteOptions()...); err != nil {
				t.Fatalf("pulling %s: %v", digestRef, err)
			}

			// The certificate names the host explicitly, and 127.0.0.1
			// and localhost as before.
			host, port, err := net.SplitHostPort(reg.Host)
			if err != nil {
				t.Fatal(err)
			}
			for _, serverName := range []string{host, "127.0.0.1", "localhost"} {
				conn, err := tls.Dial("tcp", reg.Host, &tls.Config{RootCAs: reg.CertPool(), ServerName: serverName, MinVersion: tls.VersionTLS12})
				if err != nil {
					t.Errorf("TLS for %q: %v", serverName, err)
					continue
				}
				_ = conn.Close()
			}

			// localhost stays on loopback: reachable at 127.0.0.1.
			if host == "localhost" {
				conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", port))
				if err != nil {
					t.Fatalf("localhost registry not on 127.0.0.1: %v", err)
				}
				_ = conn.Close()
			}
		})
	}
}

func TestWithHostRejectsPort(t *testing.T) {
	for _, host := range []string{"127.0.0.1:5000", "localhost:5000", "[::1]:5000", "a/b"} {
		if reg, err := testregistry.Start(testregistry.WithHost(host)); err == nil {
			reg.Close()
			t.Errorf("WithHost(%q) started a registry at %s, want an error", host, reg.Host)
		}
	}
}
