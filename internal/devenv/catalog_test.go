package devenv

import (
	"archive/tar"
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/rukpak-dev/rukpak/catalog/fbc"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// TestServeCatalog serves kube-green's real catalog as make run does: both
// tags are valid catalogs whose every bundle image is the example
// registry's copy by digest, and the second carries the deprecation.
func TestServeCatalog(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(nopLogger())))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ex := &Examples{RegistryAddr: host}
	ctx := context.Background()
	if err := ex.ServeCatalog(ctx, testenv.SharedTestdata("catalogs", "kube-green"), KubeGreenDeprecations); err != nil {
		t.Fatal(err)
	}
	for tag, deprecated := range map[string]bool{CatalogExampleImage: false, CatalogExampleDeprecatedImage: true} {
		content := pullFile(t, host+"/"+tag, "configs/kube-green/catalog.yaml")
		if strings.Contains(content, "quay.io/openshift-community-operators/kube-green@") {
			t.Errorf("%s still names an upstream bundle image", tag)
		}
		if n := strings.Count(content, "\nimage: "+host+"/kube-green-bundle@sha256:"); n != 10 {
			t.Errorf("%s: %d bundle images from the example registry, want 10", tag, n)
		}
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "configs"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "configs", "catalog.yaml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		idx, err := fbc.Build(os.DirFS(dir), t.TempDir(), fbc.Limits{})
		if err != nil {
			t.Fatalf("%s is not a valid catalog: %v", tag, err)
		}
		if idx.Counts.Bundles != 10 {
			t.Errorf("%s: %d bundles, want 10", tag, idx.Counts.Bundles)
		}
		if got := strings.Contains(content, "schema: olm.deprecations"); got != deprecated {
			t.Errorf("%s: deprecations %v, want %v", tag, got, deprecated)
		}
	}
	// Each bundle's copy is the bundle directory's content.
	csv := pullFile(t, host+"/kube-green-bundle:v0.5.2", "manifests/kube-green.clusterserviceversion.yaml")
	if !strings.Contains(csv, "name: kube-green.v0.5.2") {
		t.Errorf("the 0.5.2 bundle's CSV is not 0.5.2's:\n%.300s", csv)
	}
}

func TestCatalogBundlesRefusesBundlesWithoutVersion(t *testing.T) {
	_, err := catalogBundles([]byte("schema: olm.bundle\nname: p.v1\npackage: p\nimage: x/y:1\n"))
	if err == nil || !strings.Contains(err.Error(), `bundle "p.v1": no package, version or image`) {
		t.Fatalf("error %v", err)
	}
	_, err = catalogBundles([]byte("schema: olm.bundle\nname: p.v1\npackage: p\nimage: x/y:1\nproperties:\n- type: olm.package\n  value: {packageName: p, version: ../../x}\n"))
	if err == nil {
		t.Fatal("a version that is a path was accepted")
	}
}

// pullFile returns one file of an image's filesystem.
func pullFile(t *testing.T, ref, file string) string {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r)
	if err != nil {
		t.Fatalf("pulling %s: %v", ref, err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s has no %s: %v", ref, file, err)
		}
		if h.Name == file {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return string(data)
		}
	}
}
