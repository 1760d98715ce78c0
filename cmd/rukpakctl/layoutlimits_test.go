package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/rukpak-dev/rukpak/internal/heapwatch"
)

// writeBlob writes data as a blob of the layout in dir and returns its
// descriptor.
func writeBlob(t *testing.T, dir string, mt types.MediaType, data []byte) v1.Descriptor {
	t.Helper()
	sum := sha256.Sum256(data)
	d := v1.Descriptor{MediaType: mt, Size: int64(len(data)), Digest: v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", sum)}}
	must(t, os.WriteFile(filepath.Join(dir, "blobs", "sha256", d.Digest.Hex), data, 0o644))
	return d
}

// manyLayersLayout is an OCI layout of one image whose manifest lists n
// layers, none of whose blobs exists: reading any layer fails.
func manyLayersLayout(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion": "1.0.0"}`), 0o644))
	cfg := writeBlob(t, dir, types.OCIConfigJSON, []byte(`{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}`))
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Config: cfg}
	for i := range n {
		sum := sha256.Sum256(fmt.Appendf(nil, "layer %d", i))
		m.Layers = append(m.Layers, v1.Descriptor{MediaType: types.OCILayer, Size: 32, Digest: v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", sum)}})
	}
	raw, err := json.Marshal(m)
	must(t, err)
	md := writeBlob(t, dir, types.OCIManifestSchema1, raw)
	idx, err := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{md}})
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "index.json"), idx, 0o644))
	return dir
}

// TestRenderOCILayoutLayerCount: an OCI layout whose image has more layers
// than the limit is refused from its manifest, before any layer is read
// (their blobs do not exist) and without work per layer: the manifest is
// decoded a couple of times, not once per layer (5,000 layers allocated
// gigabytes and took 80 s of CPU).
func TestRenderOCILayoutLayerCount(t *testing.T) {
	dir := manyLayersLayout(t, 5000)
	var err error
	_, allocated, _ := heapwatch.Measure(func() { _, err = render(t, dir) })
	const want = "image has 5000 layers, more than the limit of 256"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v, want one containing %q", err, want)
	}
	t.Logf("allocated %.1f MiB refusing 5,000 layers", float64(allocated)/(1<<20))
	if allocated > 64<<20 {
		t.Errorf("allocated %.1f MiB refusing the layout, want at most 64 MiB", float64(allocated)/(1<<20))
	}
}

// TestRenderOCILayoutMetadataBound: a manifest larger than the bound is
// refused before it is read.
func TestRenderOCILayoutMetadataBound(t *testing.T) {
	dir := manyLayersLayout(t, 1)
	var idx v1.IndexManifest
	raw, err := os.ReadFile(filepath.Join(dir, "index.json"))
	must(t, err)
	must(t, json.Unmarshal(raw, &idx))
	blob := filepath.Join(dir, "blobs", "sha256", idx.Manifests[0].Digest.Hex)
	must(t, os.Truncate(blob, maxLayoutMetadata+1))
	_, err = render(t, dir)
	want := fmt.Sprintf("%s is %d bytes, more than the limit of %d", idx.Manifests[0].Digest.Hex, maxLayoutMetadata+1, maxLayoutMetadata)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v, want one containing %q", err, want)
	}
}
