package storage

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/rukpak-dev/rukpak/internal/heapwatch"
	"github.com/rukpak-dev/rukpak/unpack"
)

// RUKPAK_HOSTILE_MEASURE=1 measures loading stored content that is mostly
// not what installs read, for docs/security.md: the outcome, peak heap and
// time of Load (go test -v -run TestMeasureLoad ./storage/).
func TestMeasureLoad(t *testing.T) {
	if os.Getenv("RUKPAK_HOSTILE_MEASURE") == "" {
		t.Skip("set RUKPAK_HOSTILE_MEASURE=1 to measure")
	}
	ctx := context.Background()
	dir := t.TempDir()
	cases := []struct {
		name  string
		files map[string]int64 // name -> size of zeros
		s     *LocalDirectory
	}{
		{"150 MiB file outside manifests/", map[string]int64{"manifests/a.yaml": 0, "tests/blob.bin": 150 << 20}, &LocalDirectory{RootDirectory: dir}},
		{"2 GiB file outside manifests/", map[string]int64{"manifests/a.yaml": 0, "tests/blob.bin": 2 << 30}, &LocalDirectory{RootDirectory: dir}},
		{"2 GiB file outside manifests/, limit raised to 4 GiB", map[string]int64{"manifests/a.yaml": 0, "tests/blob.bin": 2 << 30}, &LocalDirectory{RootDirectory: dir, Limits: unpack.Limits{MaxBytes: 4 << 30}}},
		{"2 GiB in manifests/ (a hostile archive)", map[string]int64{"manifests/a.yaml": 2 << 30}, &LocalDirectory{RootDirectory: dir, Limits: unpack.Limits{MaxBytes: 4 << 30}}},
	}
	for i, tc := range cases {
		b := bundle(fmt.Sprintf("b%d", i))
		writeZeros(t, filepath.Join(dir, b.Name+".tgz"), tc.files)
		var err error
		peak, _, took := heapwatch.Measure(func() { _, err = tc.s.Load(ctx, b) })
		t.Logf("%s: err=%v; peak heap +%.1f MiB, %v", tc.name, err, float64(peak)/(1<<20), took.Round(time.Millisecond))
	}
}

// writeZeros writes an archive of files of zeros, in name order.
func writeZeros(t *testing.T, file string, files map[string]int64) {
	t.Helper()
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	for _, name := range []string{"manifests/a.yaml", "tests/blob.bin"} {
		size, ok := files[name]
		if !ok {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.CopyN(tw, zeros{}, size); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
