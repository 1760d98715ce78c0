package plain

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
)

// BenchmarkFiles decodes the largest real CRDs of the shared test data
// (prometheus-operator's, 600–830 KB each) as one plain+v0 bundle.
func BenchmarkFiles(b *testing.B) {
	dir := "../../../shared/testdata/helm/prometheus-operator-crds/charts/crds/templates"
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Skipf("shared test data not available: %v", err)
	}
	fsys := fstest.MapFS{}
	var size int64
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		// Helm templates: drop the lines holding template directives (an
		// if around the file, optional annotations).
		data = stripTemplateLines(data)
		fsys["manifests/"+e.Name()] = &fstest.MapFile{Data: data}
		size += int64(len(data))
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Files(fsys); err != nil {
			b.Fatal(err)
		}
	}
}

func stripTemplateLines(data []byte) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if !bytes.Contains(line, []byte("{{")) {
			out = append(out, line...)
		}
	}
	return out
}
