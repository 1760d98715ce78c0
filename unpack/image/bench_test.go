package image

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/heapwatch"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/unpack"
)

// BenchmarkUnpack compares an unpack (pull, decompress, extract) with the
// floor: a plain pull of the same compressed layers to files. Both run
// against a loopback TLS registry. peak-heap-MiB is the largest growth of
// live heap during one operation: it must not grow with the image size.
//
//	go test -run '^$' -bench . -benchtime 3x ./unpack/image/
func BenchmarkUnpack(b *testing.B) {
	reg := testregistry.New(b)
	for _, shape := range []struct {
		layers int
		size   int
	}{{1, 50 << 20}, {20, 5 << 20}} {
		rng := rand.NewChaCha8([32]byte{byte(shape.layers)})
		var layers []v1.Layer
		for i := range shape.layers {
			data := make([]byte, shape.size) // incompressible
			_, _ = rng.Read(data)
			layers = append(layers, testregistry.Layer(b, map[string]string{fmt.Sprintf("manifests/blob-%02d", i): string(data)}))
		}
		name := fmt.Sprintf("%dx%dMiB", shape.layers, shape.size>>20)
		ref := reg.MustPush(b, reg.Ref("bench:"+name), testregistry.Image(b, layers...))
		total := int64(shape.layers * shape.size)

		b.Run(name+"/pull-floor", func(b *testing.B) {
			measure(b, total, func(dir string) error { return pullToDisk(reg, ref, dir) })
		})
		b.Run(name+"/unpack", func(b *testing.B) {
			measure(b, total, func(dir string) error {
				u := New(unpack.Config{BaseDir: dir, Limits: unpack.Limits{MaxBytes: 1 << 30}})
				bundle := bundleFor(rukpakv1alpha1.ImageSource{Ref: ref, CertificateData: string(reg.CAPEM)})
				_, err := u.Unpack(b.Context(), bundle)
				return err
			})
		})
	}

	// Many small files, the shape of a real bundle: 1,000 manifests.
	files := map[string]string{}
	for i := range 1000 {
		files[fmt.Sprintf("manifests/cm-%04d.yaml", i)] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%04d\ndata:\n  value: %q\n", i, fmt.Sprint(i))
	}
	ref := reg.MustPush(b, reg.Ref("bench:1000files"), testregistry.Image(b, testregistry.Layer(b, files)))
	b.Run("1000files/unpack", func(b *testing.B) {
		measure(b, 0, func(dir string) error {
			u := New(unpack.Config{BaseDir: dir})
			_, err := u.Unpack(b.Context(), bundleFor(rukpakv1alpha1.ImageSource{Ref: ref, CertificateData: string(reg.CAPEM)}))
			return err
		})
	})
}

// pullToDisk writes each layer's compressed blob to a file: the least any
// puller has to do.
func pullToDisk(reg *testregistry.Registry, ref, dir string) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return err
	}
	img, err := remote.Image(r, reg.RemoteOptions()...)
	if err != nil {
		return err
	}
	return testregistry.PullLayers(img, dir)
}

// measure runs op b.N times on a fresh directory, reporting throughput and
// the peak heap growth seen by a sampler.
func measure(b *testing.B, bytes int64, op func(dir string) error) {
	b.SetBytes(bytes)
	var peak uint64
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		stop := heapwatch.Start()
		b.StartTimer()
		if err := op(dir); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		peak = max(peak, stop())
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
}
