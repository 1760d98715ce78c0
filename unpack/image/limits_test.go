package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testnet"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/unpack"
)

// zstdWindowLayer is a layer of one small file, zstd compressed in raw
// blocks under a frame header declaring the window windowDescriptor
// encodes (exponent<<3 | mantissa: 2^(10+exponent) * (1+mantissa/8)).
func zstdWindowLayer(t testing.TB, windowDescriptor byte) v1.Layer {
	t.Helper()
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	_ = tw.WriteHeader(&tar.Header{Name: "manifests/a.yaml", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
	_, _ = tw.Write([]byte("a"))
	_ = tw.Close()
	data := tb.Bytes()
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, windowDescriptor}
	h := uint32(len(data))<<3 | 1 // one raw block, the last
	frame = append(frame, byte(h), byte(h>>8), byte(h>>16))
	frame = append(frame, data...)
	// Taken as is: go-containerregistry's own layer types would decompress
	// it to compute a diff ID.
	return static.NewLayer(frame, types.OCILayerZStd)
}

// allocated is how much fn allocated on the heap, in total.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestUnpackLimits(t *testing.T) {
	reg := testregistry.New(t)
	ca := string(reg.CAPEM)
	var layers []v1.Layer
	for i := range 4 {
		layers = append(layers, testregistry.Layer(t, map[string]string{fmt.Sprintf("manifests/%d.yaml", i): "x"}))
	}
	layersDigest := reg.MustPush(t, reg.Ref("layers:v1"), testregistry.Image(t, layers...))
	layersDigest = layersDigest[strings.Index(layersDigest, "@")+1:]
	big := make([]byte, 64<<10)
	_, _ = rand.NewChaCha8([32]byte{}).Read(big) // incompressible
	reg.MustPush(t, reg.Ref("big:v1"), testregistry.Image(t, testregistry.Layer(t, map[string]string{"manifests/big": string(big)})))
	reg.MustPush(t, reg.Ref("zstd:v1"), testregistry.Image(t, zstdWindowLayer(t, 19<<3))) // 512 MiB window
	reg.MustPush(t, reg.Ref("zstd:ok"), testregistry.Image(t, zstdWindowLayer(t, 10<<3))) // 1 MiB window

	huge, hugeDigest := pushLayers(t, reg, "huge:v1", 30_000) // a 5 MiB manifest
	for _, tc := range []struct {
		name, ref, wantErr string
		limits             unpack.Limits
	}{
		{
			name: "manifest over the fetch limit", ref: reg.Ref("layers:v1"), limits: unpack.Limits{MaxFetchBytes: 100},
			wantErr: `image "` + reg.Ref("layers:v1") + `": Get "https://` + reg.Host + `/v2/layers/manifests/` + layersDigest + `": ` +
				`the image is larger than the fetch limit of 100 bytes`,
		},
		{
			name: "manifest over 4 MiB", ref: huge, limits: unpack.Limits{MaxLayers: 100_000},
			wantErr: `image "` + huge + `": Get "https://` + reg.Host + `/v2/huge/manifests/` + hugeDigest + `": ` +
				`the registry's response to GET /v2/huge/manifests/` + hugeDigest + ` is larger than the limit of 4194304 bytes`,
		},
		{
			name: "too many layers", ref: reg.Ref("layers:v1"), limits: unpack.Limits{MaxLayers: 3},
			wantErr: `image "` + reg.Ref("layers:v1") + `": the image has 4 layers, more than the limit of 3`,
		},
		{
			name: "layers declare more than the fetch limit", ref: reg.Ref("big:v1"), limits: unpack.Limits{MaxFetchBytes: 16 << 10},
			wantErr: `image "` + reg.Ref("big:v1") + `": the image's layers declare more than the fetch limit of 16384 bytes`,
		},
		{
			name: "zstd declaring a 512 MiB window", ref: reg.Ref("zstd:v1"),
			wantErr: `image "` + reg.Ref("zstd:v1") + `": layer 0: reading zstd archive: it needs a decompression window of more than 16777216 bytes (the limit)`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUnpacker(t, tc.limits)
			before := reg.BlobPulls()
			var err error
			alloc := allocated(func() {
				_, err = u.Unpack(t.Context(), bundleFor(rukpakv1alpha1.ImageSource{Ref: tc.ref, CertificateData: ca}))
			})
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("error = %v, want %q", err, tc.wantErr)
			}
			if !unpack.IsTerminal(err) {
				t.Errorf("error %v is retryable", err)
			}
			if alloc > 64<<20 {
				t.Errorf("refusing it allocated %d MiB, want < 64 MiB", alloc>>20)
			}
			if got := reg.BlobPulls() - before; tc.limits != (unpack.Limits{}) && got != 0 {
				t.Errorf("fetched %d blobs before refusing the manifest", got)
			}
		})
	}

	res := unpackOK(t, newUnpacker(t, unpack.Limits{}), bundleFor(rukpakv1alpha1.ImageSource{Ref: reg.Ref("zstd:ok"), CertificateData: ca}))
	if got := files(t, res.FS); !slices.Equal(got, []string{"manifests/a.yaml=a"}) {
		t.Errorf("zstd layer: files = %q", got)
	}
}

// fakeRegistry answers /v2/, refuses a manifest's HEAD (so the unpacker
// GETs it, for the registry's own words) and serves what manifest writes
// for every manifest GET.
func fakeRegistry(t *testing.T, manifest http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			return
		}
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		manifest(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "https://")
}

func TestUnpackBoundsRegistryResponses(t *testing.T) {
	zeroDigest := "sha256:" + strings.Repeat("0", 64)
	endless := fakeRegistry(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		chunk := bytes.Repeat([]byte(" "), 64<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	body := strings.Repeat("<html>an error page, ", 50_000) // 1 MiB
	errorPage := fakeRegistry(t, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, body, http.StatusBadRequest)
	})
	for _, tc := range []struct {
		name, host, wantErr string
		terminal            bool
	}{
		{
			name: "endless manifest", host: endless, terminal: true,
			wantErr: `image "` + endless + `/bundle@` + zeroDigest + `": the registry's response to GET /v2/bundle/manifests/` + zeroDigest + ` is larger than the limit of 4194304 bytes`,
		},
		{
			name: "1 MiB error page", host: errorPage, terminal: true,
			wantErr: `pulling image "` + errorPage + `/bundle@` + zeroDigest + `": GET https://` + errorPage + `/v2/bundle/manifests/` + zeroDigest + `: unexpected status code 400 Bad Request`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// By digest: its HEAD refused, the GET reads the answer.
			ref := tc.host + "/bundle@" + zeroDigest
			var err error
			alloc := allocated(func() {
				_, err = newUnpacker(t, unpack.Limits{FetchTimeout: time.Minute}).Unpack(t.Context(), bundleFor(rukpakv1alpha1.ImageSource{Ref: ref, InsecureSkipTLSVerify: true}))
			})
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("error = %v\nwant    %q", err, tc.wantErr)
			}
			if unpack.IsTerminal(err) != tc.terminal {
				t.Errorf("terminal = %v, want %v", unpack.IsTerminal(err), tc.terminal)
			}
			if alloc > 64<<20 {
				t.Errorf("allocated %d MiB, want < 64 MiB", alloc>>20)
			}
		})
	}
}

// A registry that accepts connections and never answers costs one fetch
// timeout, not a worker for ever.
func TestUnpackFetchTimeout(t *testing.T) {
	blackhole := testnet.Blackhole(t)
	ref := blackhole + "/bundle:v1"
	u := newUnpacker(t, unpack.Limits{FetchTimeout: 300 * time.Millisecond})
	start := time.Now()
	_, err := u.Unpack(t.Context(), bundleFor(rukpakv1alpha1.ImageSource{Ref: ref, InsecureSkipTLSVerify: true}))
	elapsed := time.Since(start)
	want := `pulling image "` + ref + `": not done within the fetch timeout of 300ms: `
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error = %v, want one starting %q", err, want)
	}
	if unpack.IsTerminal(err) {
		t.Errorf("a timeout is retryable, got terminal %v", err)
	}
	if elapsed > 30*time.Second {
		t.Errorf("returned after %s", elapsed)
	}
}

func TestUnpackIndexPlatforms(t *testing.T) {
	reg := testregistry.New(t)
	ca := string(reg.CAPEM)
	image := func(content string) v1.Image {
		return testregistry.Image(t, testregistry.Layer(t, map[string]string{"manifests/a.yaml": content}))
	}
	push := func(tag string, adds ...mutate.IndexAddendum) string {
		ref, err := name.ParseReference(reg.Ref(tag))
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.WriteIndex(ref, mutate.AppendManifests(empty.Index, adds...), reg.RemoteOptions()...); err != nil {
			t.Fatal(err)
		}
		return ref.String()
	}
	on := func(os, arch, content string) mutate.IndexAddendum {
		return mutate.IndexAddendum{Add: image(content), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: os, Architecture: arch}}}
	}
	multi := push("multi:v1", on("linux", "s390x", "s390x"), on("linux", runtime.GOARCH, "own"), on("linux", "amd64", "amd64"))
	var others []mutate.IndexAddendum
	for i := range 10 {
		others = append(others, on("plan9", fmt.Sprintf("arch%d", i), "x"))
	}
	foreign := push("foreign:v1", others...)

	res := unpackOK(t, newUnpacker(t, unpack.Limits{}), bundleFor(rukpakv1alpha1.ImageSource{Ref: multi, CertificateData: ca}))
	if got := files(t, res.FS); !slices.Equal(got, []string{"manifests/a.yaml=own"}) {
		t.Errorf("files = %q, want the image for linux/%s", got, runtime.GOARCH)
	}

	want := "linux/amd64"
	if runtime.GOARCH != "amd64" {
		want = "linux/" + runtime.GOARCH + " or linux/amd64"
	}
	_, err := newUnpacker(t, unpack.Limits{}).Unpack(t.Context(), bundleFor(rukpakv1alpha1.ImageSource{Ref: foreign, CertificateData: ca}))
	assertErr(t, err, `image "`+foreign+`": the image index has no image for `+want+
		` (it has: plan9/arch0, plan9/arch1, plan9/arch2, plan9/arch3, plan9/arch4, plan9/arch5, plan9/arch6, plan9/arch7, and 2 more)`, true)
}
