package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// helloWorldArchive packages the shared hello-world chart, its default
// replicaCount set to replicas, as `helm package` does.
func helloWorldArchive(t *testing.T, replicas int) string {
	t.Helper()
	ch, err := loader.LoadDir(shared(t, "helm/hello-world"))
	if err != nil {
		t.Fatal(err)
	}
	ch.Values["replicaCount"] = replicas
	for _, f := range ch.Raw {
		if f.Name == "values.yaml" {
			f.Data = bytes.Replace(f.Data, []byte("replicaCount: 1"), []byte(fmt.Sprintf("replicaCount: %d", replicas)), 1)
		}
	}
	file, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return file
}

// rukpakctl diff against a helm-class BundleDeployment a real provisioner
// installed: the chart .tgz rendered with the BundleDeployment's values.
func TestDiffHelm(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	env := testenv.Pooled(t)
	ctx := context.Background()
	const ns = "rukpak-system"
	for _, name := range []string{ns, "hw"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	startProvisioner(t, env, ns, rukpakv1alpha1.ProvisionerClassHelm)

	v1 := helloWorldArchive(t, 1)
	data, err := os.ReadFile(v1)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "hello-world-v1", Namespace: ns},
		Immutable:  ptr.To(true),
		BinaryData: map[string][]byte{"hello-world-0.1.0.tgz": data},
	}); err != nil {
		t.Fatal(err)
	}
	bd := &rukpakv1alpha1.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "hw"},
		Spec: rukpakv1alpha1.BundleDeploymentSpec{
			ProvisionerClassName: rukpakv1alpha1.ProvisionerClassHelm,
			// The Service's port comes from the BundleDeployment's values:
			// a diff that ignored them would change it back to 80.
			Config: &apiextensionsv1.JSON{Raw: []byte(`{"installNamespace":"hw","values":"service:\n  port: 8080\n"}`)},
			Template: rukpakv1alpha1.BundleTemplate{Spec: rukpakv1alpha1.BundleSpec{
				ProvisionerClassName: rukpakv1alpha1.ProvisionerClassHelm,
				Source: rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps, ConfigMaps: []rukpakv1alpha1.ConfigMapSource{
					{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: "hello-world-v1"}},
				}},
			}},
		},
	}
	if err := env.Client.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}
	waitInstalled(t, env, bd)
	kubeconfigPath := adminKubeconfig(t, env)
	diff := func(chart string) string {
		t.Helper()
		var out bytes.Buffer
		root := newRootCmd(&out)
		root.SetArgs([]string{"diff", "hw", chart, "--kubeconfig", kubeconfigPath})
		if err := root.ExecuteContext(ctx); err != nil {
			t.Fatalf("rukpakctl diff: %v", err)
		}
		return out.String()
	}
	header := fmt.Sprintf("BundleDeployment hw: release revision 1 (active bundle %s)\n", bd.Status.ActiveBundle)

	t.Run("two replicas by default", func(t *testing.T) {
		want := header + `change  Deployment hw/hw-hello-world
          spec.replicas
0 to create, 1 to change, 0 to delete, 2 unchanged
`
		if got := diff(helloWorldArchive(t, 2)); got != want {
			t.Fatalf("got:\n%s\nwant:\n%s", got, want)
		}
	})
	t.Run("the installed chart changes nothing", func(t *testing.T) {
		want := header + "0 to create, 0 to change, 0 to delete, 3 unchanged\n"
		if got := diff(v1); got != want {
			t.Fatalf("got:\n%s\nwant:\n%s", got, want)
		}
	})
}
