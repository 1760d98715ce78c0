package upload

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/rukpak-dev/rukpak/internal/heapwatch"
	"github.com/rukpak-dev/rukpak/unpack"
)

// streamTar writes a gzip tar of files of size bytes each (zeros, or
// random bytes) into w until n files are written or the reader stops.
func streamTar(w *io.PipeWriter, files int, size int64, random bool) {
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	chunk := make([]byte, 256<<10)
	rng := rand.NewChaCha8([32]byte{})
	var err error
	for i := 0; i < files && err == nil; i++ {
		if err = tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("manifests/f%05d", i), Typeflag: tar.TypeReg, Mode: 0o644, Size: size}); err != nil {
			break
		}
		for left := size; left > 0 && err == nil; left -= int64(len(chunk)) {
			if random {
				_, _ = rng.Read(chunk)
			}
			_, err = tw.Write(chunk[:min(left, int64(len(chunk)))])
		}
	}
	if err == nil {
		_ = tw.Close()
		_ = zw.Close()
	}
	_ = w.CloseWithError(err)
}

// TestMeasureHostileUploads measures what hostile uploads cost the
// handler with the default limits, for docs/security.md. Opt in:
//
//	RUKPAK_HOSTILE_MEASURE=1 go test -count=1 -v -run TestMeasureHostileUploads ./unpack/upload/
func TestMeasureHostileUploads(t *testing.T) {
	if os.Getenv("RUKPAK_HOSTILE_MEASURE") == "" {
		t.Skip("set RUKPAK_HOSTILE_MEASURE=1 to measure")
	}
	for _, tc := range []struct {
		name     string
		declared int64
		files    int
		size     int64
		random   bool
		want     int
	}{
		{name: "2.5 GiB declared", declared: 2560 << 20, want: http.StatusRequestEntityTooLarge},
		{name: "1 GiB file of zeros (1 MiB compressed), chunked", files: 1, size: 1 << 30, want: http.StatusUnprocessableEntity},
		{name: "250 x 1 MiB files of zeros, chunked", files: 250, size: 1 << 20, want: http.StatusUnprocessableEntity},
		{name: "600 MiB incompressible, chunked", files: 10, size: 60 << 20, random: true, want: http.StatusUnprocessableEntity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 4)
			f.store.limits = unpack.DefaultLimits
			var body io.Reader
			declared := tc.declared
			if tc.files > 0 {
				pr, pw := io.Pipe()
				go streamTar(pw, tc.files, tc.size, tc.random)
				defer pr.Close()
				body, declared = pr, -1
			}
			runtime.GC()
			stop := heapwatch.Start()
			start := time.Now()
			rec := f.put("/uploads/up.tgz", "alice-token", body, declared)
			elapsed := time.Since(start)
			peak := stop()
			if rec.Code != tc.want {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.want)
			}
			t.Logf("| %s | %d `%s` | +%.1f MiB | %s |", tc.name, rec.Code, rec.Body.String()[:len(rec.Body.String())-1], float64(peak)/(1<<20), elapsed.Round(time.Millisecond))
		})
	}
}
