package crdupgrade

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/rukpak-dev/rukpak/internal/testfiles"
)

const testdata = "../../../shared/testdata"

// oldPrometheusCRDs are the CRDs of the prometheus-operator 0.47.0
// registry+v1 bundle, by name.
func oldPrometheusCRDs(t testing.TB) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	dir := filepath.Join(testdata, "registry-v1", "prometheus-0.47.0", "manifests")
	files, err := filepath.Glob(filepath.Join(dir, "*.crd.yaml"))
	if err != nil || len(files) == 0 {
		t.Skipf("shared test data not available: %v", err)
	}
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		decodeCRDs(t, data, out)
	}
	return out
}

// newPrometheusCRDs renders the prometheus-operator-crds chart (0.93.1)
// with Helm's engine and its default values.
func newPrometheusCRDs(t testing.TB) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, r := range testfiles.RenderChart(t, filepath.Join(testdata, "helm", "prometheus-operator-crds")) {
		decodeCRDs(t, []byte(r), out)
	}
	return out
}

func decodeCRDs(t testing.TB, data []byte, out map[string]*apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := dec.Decode(crd); err != nil {
			if err.Error() == "EOF" {
				return
			}
			t.Fatal(err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			continue
		}
		apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
		out[crd.Name] = crd
	}
}

func runtimeToUnstructured(crd *apiextensionsv1.CustomResourceDefinition) (map[string]any, error) {
	c := crd.DeepCopy()
	c.APIVersion, c.Kind = apiextensionsv1.SchemeGroupVersion.String(), "CustomResourceDefinition"
	return runtime.DefaultUnstructuredConverter.ToUnstructured(c)
}
