package devenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The catalog example: a real package's file-based catalog and the
// registry+v1 bundles it names (../shared/testdata/catalogs/kube-green:
// catalog.yaml, bundles/<version>/), served by make run's registry so the
// README can install from a catalog with a version range.
const (
	// CatalogExampleImage is the catalog as published, its bundle images
	// rewritten to the example registry's copies (by digest).
	CatalogExampleImage = "catalogs/kube-green:v1"
	// CatalogExampleDeprecatedImage is the same catalog with
	// KubeGreenDeprecations added, as a publisher's next push would be.
	CatalogExampleDeprecatedImage = "catalogs/kube-green:deprecations"
)

// KubeGreenDeprecations is the olm.deprecations blob the example's second
// tag adds. The real catalog deprecates nothing; this one is make run's.
const KubeGreenDeprecations = `schema: olm.deprecations
package: kube-green
entries:
- reference: {schema: olm.bundle, name: kube-green.v0.7.0}
  message: kube-green 0.7.0 is deprecated, upgrade to 0.7.1 (an example deprecation that make run adds)
`

// maxCatalogExample bounds the catalog file read: the example is a few
// hundred KiB; anything far larger is not the example.
const maxCatalogExample = 16 << 20

// ServeCatalog pushes every bundle of the catalog directory dir
// (catalog.yaml, whose olm.bundle blobs name their versions, and
// bundles/<version>/) to the example registry as
// <package>-bundle:v<version>, then the catalog itself as two FBC images
// (configs/<package>/catalog.yaml): CatalogExampleImage, with each bundle's
// image replaced by its pushed copy's digest reference, and
// CatalogExampleDeprecatedImage, the same plus deprecations. A bundle the
// catalog names without a directory keeps its upstream image (resolution
// may pick it; its pull then fails, as an unreachable registry's would).
func (ex *Examples) ServeCatalog(ctx context.Context, dir, deprecations string) error {
	data, err := readBounded(filepath.Join(dir, "catalog.yaml"), maxCatalogExample)
	if err != nil {
		return err
	}
	blobs, err := catalogBundles(data)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, "catalog.yaml"), err)
	}
	if len(blobs) == 0 {
		return fmt.Errorf("%s names no bundle", filepath.Join(dir, "catalog.yaml"))
	}
	pkg := blobs[0].pkg
	catalog := string(data)
	for _, b := range blobs {
		bundleDir := filepath.Join(dir, "bundles", b.version)
		if _, err := os.Stat(bundleDir); errors.Is(err, os.ErrNotExist) {
			continue
		}
		ref, err := pushBundle(ctx, fmt.Sprintf("%s/%s-bundle:v%s", ex.RegistryAddr, b.pkg, b.version), bundleDir)
		if err != nil {
			return err
		}
		catalog = strings.ReplaceAll(catalog, b.image, ref)
	}
	for tag, content := range map[string]string{
		CatalogExampleImage:           catalog,
		CatalogExampleDeprecatedImage: catalog + "\n---\n" + deprecations,
	} {
		staging, err := os.MkdirTemp("", "rukpak-catalog-example-")
		if err != nil {
			return err
		}
		err = writeCatalogDir(staging, pkg, content)
		if err == nil {
			err = pushDir(ctx, ex.RegistryAddr+"/"+tag, staging)
		}
		_ = os.RemoveAll(staging)
		if err != nil {
			return err
		}
	}
	return nil
}

func writeCatalogDir(root, pkg, content string) error {
	d := filepath.Join(root, "configs", pkg)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(d, "catalog.yaml"), []byte(content), 0o644)
}

type catalogBundle struct {
	pkg, version, image string
}

// catalogBundles returns the olm.bundle blobs of a YAML catalog: package,
// version (from the olm.package property) and image.
func catalogBundles(data []byte) ([]catalogBundle, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []catalogBundle
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		var blob struct {
			Schema     string `json:"schema"`
			Name       string `json:"name"`
			Package    string `json:"package"`
			Image      string `json:"image"`
			Properties []struct {
				Type  string          `json:"type"`
				Value json.RawMessage `json:"value"`
			} `json:"properties"`
		}
		if err := yaml.Unmarshal(doc, &blob); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if blob.Schema != "olm.bundle" {
			continue
		}
		b := catalogBundle{pkg: blob.Package, image: blob.Image}
		for _, p := range blob.Properties {
			if p.Type != "olm.package" {
				continue
			}
			var v struct {
				Version string `json:"version"`
			}
			if err := json.Unmarshal(p.Value, &v); err != nil {
				return nil, fmt.Errorf("bundle %s: olm.package property: %w", blob.Name, err)
			}
			b.version = v.Version
		}
		if b.pkg == "" || b.version == "" || b.image == "" || strings.ContainsAny(b.version, `/\`) {
			return nil, fmt.Errorf("bundle %q: no package, version or image", blob.Name)
		}
		out = append(out, b)
	}
}

// readBounded reads at most limit bytes of path, failing beyond.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}
