package provisioner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/provisioner/helm"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// chartCRDs renders prometheus-operator-crds with its default values, as
// the helm class installs it, and returns the CRDs it renders to.
func chartCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	ch, err := helm.LoadChart(os.DirFS(filepath.Join(helmTestdata, "prometheus-operator-crds")))
	if err != nil {
		t.Fatal(err)
	}
	r, err := helm.Render(context.Background(), ch, nil, helm.RenderOptions{ReleaseName: "prom-crds", Namespace: "prom"})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := release.DecodeManifest(r.Release.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(objs))
	for _, o := range objs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if o.GetKind() != "CustomResourceDefinition" {
			t.Fatalf("the chart renders a %s", o.GetKind())
		}
		b, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, crd); err != nil {
			t.Fatal(err)
		}
		crds = append(crds, crd)
	}
	return crds
}

// TestIntegrationPlainPrometheusOperatorCRDs: the CRDs prometheus-operator-crds
// renders to (10 CRDs, 4.4 MB), as a plain bundle, install through the plain
// class, each CRD served as rendered, and
// uninstall with nothing left; TestIntegrationHelmPrometheusOperatorCRDs installs
// the chart itself through the helm class.
func TestIntegrationPlainPrometheusOperatorCRDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	crds := chartCRDs(t)
	if len(crds) != 10 {
		t.Fatalf("the chart renders %d CRDs, want 10", len(crds))
	}
	files := map[string]string{}
	size := 0
	for _, crd := range crds {
		b, err := yaml.Marshal(crd)
		if err != nil {
			t.Fatal(err)
		}
		files["manifests/"+crd.Name+".yaml"] = string(b)
		size += len(b)
	}
	t.Logf("plain bundle: %d CRDs, %d bytes", len(crds), size)

	if err := h.c.Create(ctx, newBD("prom-crds-plain", h.pushBundle("prom-crds-plain", files))); err != nil {
		t.Fatal(err)
	}
	h.waitBD("prom-crds-plain", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "Instantiated bundle")
	for _, want := range crds {
		live := &apiextensionsv1.CustomResourceDefinition{}
		if err := h.get(live, "", want.Name); err != nil {
			t.Fatal(err)
		}
		if got := live.Labels[rukpakv1alpha1.LabelOwnerName]; got != "prom-crds-plain" {
			t.Errorf("%s: owner label %q", live.Name, got)
		}
		if !reflect.DeepEqual(servedVersions(live), servedVersions(want)) || live.Spec.Names.Kind != want.Spec.Names.Kind {
			t.Errorf("%s serves %v of %s, want %v of %s", live.Name, servedVersions(live), live.Spec.Names.Kind, servedVersions(want), want.Spec.Names.Kind)
		}
	}
	eventually(t, "the CRDs established", func() error {
		for _, want := range crds {
			live := &apiextensionsv1.CustomResourceDefinition{}
			if err := h.get(live, "", want.Name); err != nil {
				return err
			}
			if !established(live) {
				return fmt.Errorf("%s is not established", live.Name)
			}
		}
		return nil
	})
	// 4.5 MB of CRDs compress into one record Secret.
	if records, _ := h.releaseState("prom-crds-plain"); fmt.Sprint(records) != "map[1:deployed]" {
		t.Errorf("release records %v, want revision 1 deployed", records)
	}

	names := make([]string, 0, len(crds))
	for _, crd := range crds {
		names = append(names, crd.Name)
	}
	h.waitCRDStorage(names...)
	if err := h.c.Delete(ctx, h.bd("prom-crds-plain")); err != nil {
		t.Fatal(err)
	}
	// A CRD deleted moments after it was created can meet the API server's
	// own cleanup while the CRD's storage still initialises ("could not list
	// instances: storage is (re)initializing"); the API server retries with
	// a backoff that can pass a minute, so wait as long as eventually does.
	start := time.Now()
	deadline := start.Add(testenv.WaitTimeout)
	for _, crd := range crds {
		for {
			live := &apiextensionsv1.CustomResourceDefinition{}
			err := h.get(live, "", crd.Name)
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("CRD %s not deleted after the uninstall: %v (conditions %v)", crd.Name, err, live.Status.Conditions)
			}
			testenv.Poll(start)
		}
	}
	h.waitGone(&rukpakv1alpha1.BundleDeployment{}, "", "prom-crds-plain")
	if records, chunks := h.releaseState("prom-crds-plain"); len(records) != 0 || chunks != 0 {
		t.Errorf("after uninstall: release records %v, %d chunks", records, chunks)
	}
	var left apiextensionsv1.CustomResourceDefinitionList
	if err := h.c.List(ctx, &left, client.HasLabels{rukpakv1alpha1.LabelOwnerName}); err != nil {
		t.Fatal(err)
	}
	if n := len(left.Items); n != 0 {
		t.Errorf("%d CRDs still labelled as installed", n)
	}
}

func servedVersions(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			out = append(out, v.Name)
		}
	}
	sort.Strings(out)
	return out
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
