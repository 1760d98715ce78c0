package provisioner_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// bigConfigMap is a ConfigMap holding n bytes that do not compress.
func bigConfigMap(name string, n int, seed uint64) string {
	rnd := rand.New(rand.NewPCG(seed, uint64(n)))
	raw := make([]byte, n*3/4)
	for i := range raw {
		raw[i] = byte(rnd.Uint32())
	}
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: default\ndata:\n  blob: %s\n", name, base64.StdEncoding.EncodeToString(raw))
}

// releaseState is what a cluster admin sees of release name in the
// provisioner's namespace: record revisions with their status, and the
// number of chunk Secrets.
func (h *harness) releaseState(name string) (map[string]string, int) {
	h.t.Helper()
	ctx := context.Background()
	list := &corev1.SecretList{}
	if err := h.c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{"owner": "helm", "name": name}); err != nil {
		h.t.Fatal(err)
	}
	records := map[string]string{}
	for _, s := range list.Items {
		records[s.Labels["version"]] = s.Labels["status"]
	}
	chunks := &metav1.PartialObjectMetadataList{}
	chunks.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := h.c.List(ctx, chunks, client.InNamespace(namespace), client.MatchingLabels{"core.rukpak.io/release-name": name}); err != nil {
		h.t.Fatal(err)
	}
	return records, len(chunks.Items)
}

// Four 300 KiB ConfigMaps make a release record over 1 MiB, which one
// Secret cannot hold: before chunked records the install failed forever with
// `Secret "sh.helm.release.v1.big.v1" is invalid: data: Too long: may not be
// more than 1048576 bytes`.
func TestIntegrationBigReleaseConfigMaps(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	files := map[string]string{}
	for i := range 4 {
		files[fmt.Sprintf("manifests/cm%d.yaml", i)] = bigConfigMap(fmt.Sprintf("big-%d", i), 300<<10, uint64(i))
	}
	if err := h.c.Create(context.Background(), newBD("big", h.pushBundle("big", files))); err != nil {
		t.Fatal(err)
	}
	h.waitBD("big", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	for i := range 4 {
		if _, err := h.getCM(fmt.Sprintf("big-%d", i)); err != nil {
			t.Error(err)
		}
	}
	if records, chunks := h.releaseState("big"); fmt.Sprint(records) != "map[1:deployed]" || chunks == 0 {
		t.Errorf("release records %v, %d chunks; want revision 1 deployed, split", records, chunks)
	}
}

// crdBundle is every CRD of the registry+v1 bundles in the shared test data
// (36 real CRDs, 2.9 MB; the Helm chart of prometheus-operator CRDs is a Go
// template, not plain YAML), each labelled with version, plus 2 MB of
// ConfigMaps that do not compress, so the record cannot fit one Secret: ~5 MB.
func crdBundle(t *testing.T, version string) (map[string]string, []string) {
	t.Helper()
	root := filepath.Join(testenv.RepoRoot(), "..", "shared", "testdata", "registry-v1")
	paths, err := filepath.Glob(filepath.Join(root, "*", "manifests", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Skipf("shared test data not available under %s: %v", root, err)
	}
	files := map[string]string{}
	var names []string
	size := 0
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if u.GetKind() != "CustomResourceDefinition" {
				continue
			}
			lbs := u.GetLabels()
			if lbs == nil {
				lbs = map[string]string{}
			}
			lbs["bundle-version"] = version
			u.SetLabels(lbs)
			b, err := yaml.Marshal(u.Object)
			if err != nil {
				t.Fatal(err)
			}
			files["manifests/"+u.GetName()+".yaml"] = string(b)
			names = append(names, u.GetName())
			size += len(b)
		}
		_ = f.Close()
	}
	for i := range 4 {
		cm := bigConfigMap(fmt.Sprintf("crd-padding-%d", i), 500<<10, uint64(i)+uint64(len(version))*100)
		files[fmt.Sprintf("manifests/padding-%d.yaml", i)] = cm
		size += len(cm)
	}
	t.Logf("bundle %s: %d CRDs, %d bytes of manifests", version, len(names), size)
	return files, names
}

// A ~5 MB bundle of real CRDs installs, pivots to a changed version and
// uninstalls, leaving no release record or chunk behind.
func TestIntegrationBigReleaseCRDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	v1, crds := crdBundle(t, "v1")
	if len(crds) < 30 {
		t.Fatalf("only %d CRDs in the shared test data", len(crds))
	}
	if err := h.c.Create(ctx, newBD("crds", h.pushBundle("crds-v1", v1))); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	h.waitBD("crds", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	t.Logf("installed in %v", time.Since(start).Round(time.Millisecond))
	labelled := func(version string) error {
		for _, n := range crds {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := h.c.Get(ctx, client.ObjectKey{Name: n}, crd); err != nil {
				return err
			}
			if crd.Labels["bundle-version"] != version {
				return fmt.Errorf("CRD %s is at %q", n, crd.Labels["bundle-version"])
			}
		}
		return nil
	}
	if err := labelled("v1"); err != nil {
		t.Fatal(err)
	}
	records, chunks := h.releaseState("crds")
	if fmt.Sprint(records) != "map[1:deployed]" || chunks == 0 {
		t.Errorf("after install: release records %v, %d chunks; want revision 1 deployed, split", records, chunks)
	}

	v2, _ := crdBundle(t, "v2")
	src := h.pushBundle("crds-v2", v2)
	start = time.Now()
	h.updateBD("crds", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = src })
	eventually(t, "the pivot to v2", func() error {
		if records, _ := h.releaseState("crds"); fmt.Sprint(records) != "map[1:superseded 2:deployed]" {
			return fmt.Errorf("release records %v", records)
		}
		return labelled("v2")
	})
	h.waitBD("crds", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	t.Logf("pivoted in %v", time.Since(start).Round(time.Millisecond))
	if _, chunks := h.releaseState("crds"); chunks < 2 {
		t.Errorf("after the pivot: %d chunks, want both revisions split", chunks)
	}

	start = time.Now()
	if err := h.c.Delete(ctx, h.bd("crds")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the uninstall", func() error {
		if err := h.c.Get(ctx, client.ObjectKey{Name: "crds"}, &rukpakv1alpha1.BundleDeployment{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("bundle deployment still there: %w", err)
		}
		for _, n := range crds {
			if err := h.c.Get(ctx, client.ObjectKey{Name: n}, &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("CRD %s still there: %w", n, err)
			}
		}
		if records, chunks := h.releaseState("crds"); len(records) != 0 || chunks != 0 {
			return fmt.Errorf("release records %v and %d chunks left", records, chunks)
		}
		return nil
	})
	t.Logf("uninstalled in %v", time.Since(start).Round(time.Millisecond))
	for i := range 4 {
		if _, err := h.getCM(fmt.Sprintf("crd-padding-%d", i)); !apierrors.IsNotFound(err) {
			t.Errorf("padding ConfigMap %d left: %v", i, err)
		}
	}
}
