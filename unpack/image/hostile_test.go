package image

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/heapwatch"
	"github.com/rukpak-dev/rukpak/internal/testnet"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/unpack"
)

// rawManifest pushes a hand-made manifest as it is.
type rawManifest struct {
	b  []byte
	mt types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.b, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }

// pushLayers pushes an image whose manifest names one empty layer n times,
// and returns its reference and digest.
func pushLayers(t *testing.T, reg *testregistry.Registry, tag string, n int) (string, string) {
	t.Helper()
	var empty bytes.Buffer
	_ = tar.NewWriter(&empty).Close()
	img := testregistry.Image(t, testregistry.LayerFromTar(t, empty.Bytes()))
	reg.MustPush(t, reg.Ref(tag+"-base"), img)
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	m = m.DeepCopy()
	for len(m.Layers) < n {
		m.Layers = append(m.Layers, m.Layers[0])
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(reg.Ref(tag))
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Put(r, rawManifest{raw, m.MediaType}, reg.RemoteOptions()...); err != nil {
		t.Fatalf("pushing %d layers (%d bytes of manifest): %v", n, len(raw), err)
	}
	return r.String(), fmt.Sprintf("sha256:%x", sha256.Sum256(raw))
}

// TestHostileImages10x measures what the hostile images of issue 11 cost,
// scaled ten times, for docs/security.md. Opt in:
//
//	RUKPAK_HOSTILE_10X=1 go test -count=1 -run TestHostileImages10x -v ./unpack/image/
func TestHostileImages10x(t *testing.T) {
	if os.Getenv("RUKPAK_HOSTILE_10X") == "" {
		t.Skip("set RUKPAK_HOSTILE_10X=1 to measure")
	}
	reg := testregistry.New(t)
	ca := string(reg.CAPEM)
	reg.MustPush(t, reg.Ref("zstd:512m"), testregistry.Image(t, zstdWindowLayer(t, 19<<3)))
	reg.MustPush(t, reg.Ref("zstd:5g"), testregistry.Image(t, zstdWindowLayer(t, 22<<3|2)))
	layers5k, _ := pushLayers(t, reg, "layers:5000", 5_000)
	layers50k, _ := pushLayers(t, reg, "layers:50000", 50_000)

	blackhole := testnet.Blackhole(t)
	// A /v2/ answering an endless error page.
	page := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		chunk := bytes.Repeat([]byte("<html>error page "), 4096)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer page.Close()

	for _, tc := range []struct {
		name, ref string
		limits    unpack.Limits
	}{
		{name: "zstd layer declaring a 512 MiB window (1x)", ref: reg.Ref("zstd:512m")},
		{name: "zstd layer declaring a 5 GiB window (10x)", ref: reg.Ref("zstd:5g")},
		{name: "5,000 empty layers (1x)", ref: layers5k},
		{name: "50,000 empty layers (10x)", ref: layers50k},
		{name: "registry accepting and never answering (fetch timeout 5s)", ref: blackhole + "/bundle:v1", limits: unpack.Limits{FetchTimeout: 5 * time.Second}},
		{name: "registry whose /v2/ answers an endless error page", ref: strings.TrimPrefix(page.URL, "https://") + "/bundle:v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUnpacker(t, tc.limits)
			runtime.GC()
			stop := heapwatch.Start()
			start := time.Now()
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			_, err := u.Unpack(t.Context(), bundleFor(rukpakv1alpha1.ImageSource{Ref: tc.ref, CertificateData: ca, InsecureSkipTLSVerify: !strings.HasPrefix(tc.ref, reg.Host)}))
			elapsed := time.Since(start)
			runtime.ReadMemStats(&ms1)
			peak := stop()
			if err == nil {
				t.Fatal("unpacked a hostile image")
			}
			t.Logf("| %s | %s | peak heap +%.1f MiB, allocated %.1f MiB | %s | terminal=%v",
				tc.name, err, float64(peak)/(1<<20), float64(ms1.TotalAlloc-ms0.TotalAlloc)/(1<<20), elapsed.Round(time.Millisecond), unpack.IsTerminal(err))
		})
	}
}
