package testregistry_test

import (
	"archive/tar"
	"errors"
	"io"
	"net/http"
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
