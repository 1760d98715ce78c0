package bench

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// floorCluster is a harness cluster on envtest without a provisioner.
func floorCluster(t *testing.T) *cluster {
	t.Helper()
	env := testenv.Start(t)
	c := &cluster{env: env, cfg: rest.CopyConfig(env.Config)}
	c.cfg.QPS, c.cfg.Burst = -1, 0
	var err error
	if c.c, err = client.New(c.cfg, client.Options{Scheme: env.Env.Scheme}); err != nil {
		t.Fatal(err)
	}
	if c.cs, err = kubernetes.NewForConfig(c.cfg); err != nil {
		t.Fatal(err)
	}
	return c
}

// The many floor sends, per install, the harness's create and the
// provisioner's 15 writes (TestIntegrationWritesPerInstall's table), and
// leaves nothing behind for the provisioner's run.
func TestManyFloorSendsTheProvisionersWrites(t *testing.T) {
	t.Parallel()
	c := floorCluster(t)
	const n = 3
	w0 := c.writes(t)
	if took := c.manyFloor(t, n); took <= 0 {
		t.Fatalf("floor took %s", took)
	}
	w := c.writes(t).sub(w0)
	want := map[writeKey]float64{
		{"POST", "bundledeployments"}: n, {"PATCH", "bundledeployments"}: n, {"PUT", "bundledeployments/status"}: n,
		{"POST", "bundles"}: n, {"PUT", "bundles/status"}: n, {"APPLY", "configmaps"}: n * manyObjects, {"POST", "secrets"}: n,
	}
	var sum float64
	for k, v := range want {
		if w[k] != v {
			t.Errorf("%s %s: %.0f, want %.0f (all writes: %s)", k.verb, k.resource, w[k], v, w.perEach(1))
		}
		sum += w[k]
	}
	if sum != n*(15+1) {
		t.Errorf("%.0f writes, want %d per install (15 and the create)", sum, 15+1)
	}
	ctx := context.Background()
	var bds rukpakv1alpha1.BundleDeploymentList
	var bundles rukpakv1alpha1.BundleList
	var cms corev1.ConfigMapList
	for _, l := range []client.ObjectList{&bds, &bundles} {
		if err := c.c.List(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.c.List(ctx, &cms, client.InNamespace(floorNamespace)); err != nil {
		t.Fatal(err)
	}
	if len(bds.Items)+len(bundles.Items) > 0 || len(cms.Items) > 1 { // kube-root-ca.crt needs a controller envtest lacks
		t.Errorf("left behind: %d BundleDeployments, %d Bundles, %d ConfigMaps", len(bds.Items), len(bundles.Items), len(cms.Items))
	}
}

// The crds floor creates every CRD, waits until each is Established, and
// deletes them all again.
func TestCRDsFloor(t *testing.T) {
	t.Parallel()
	c := floorCluster(t)
	crd := func(group string) []byte {
		return []byte(fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.%s
spec:
  group: %s
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, group, group))
	}
	sets := [][][]byte{{crd("a.floor.test"), crd("b.floor.test")}, {crd("c.floor.test")}}
	if took := c.crdsFloor(t, sets); took <= 0 {
		t.Fatalf("floor took %s", took)
	}
	var l apiextensionsv1.CustomResourceDefinitionList
	if err := c.c.List(context.Background(), &l); err != nil {
		t.Fatal(err)
	}
	for _, x := range l.Items {
		if x.Spec.Group != rukpakv1alpha1.GroupVersion.Group {
			t.Errorf("CRD %s left behind", x.Name)
		}
	}
}
