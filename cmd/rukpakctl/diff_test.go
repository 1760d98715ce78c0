package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/provisioner"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/storage"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/sources"
)

// rukpakctl diff against a BundleDeployment a real provisioner installed:
// combo v0.0.2 installed, diffed with v0.0.3 (two replicas), and with a
// bundle that adds one object and drops another.
func TestDiffAgainstInstalledRelease(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	env := testenv.Pooled(t)
	ctx := context.Background()
	const ns = "rukpak-system"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	startProvisioner(t, env, ns, rukpakv1alpha1.ProvisionerClassPlain)

	// combo v0.0.2, from the shared test data, as a ConfigMap source.
	src := shared(t, "plain/combo-v0.0.2/manifests")
	files := map[string]string{}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(data)
	}
	if err := env.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "combo-v0.0.2", Namespace: ns},
		Immutable:  ptr.To(true),
		Data:       files,
	}); err != nil {
		t.Fatal(err)
	}
	bd := &rukpakv1alpha1.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "combo"},
		Spec: rukpakv1alpha1.BundleDeploymentSpec{
			ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
			Template: rukpakv1alpha1.BundleTemplate{Spec: rukpakv1alpha1.BundleSpec{
				ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
				Source: rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps, ConfigMaps: []rukpakv1alpha1.ConfigMapSource{
					{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: "combo-v0.0.2"}, Path: "manifests"},
				}},
			}},
		},
	}
	if err := env.Client.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}
	waitInstalled(t, env, bd)

	kubeconfigPath := adminKubeconfig(t, env)
	// bundle writes combo v0.0.2 with edit applied to its files.
	bundle := func(edit func(files map[string]string)) string {
		dir := t.TempDir()
		edited := map[string]string{}
		for k, v := range files {
			edited[k] = v
		}
		edit(edited)
		if err := os.MkdirAll(filepath.Join(dir, "manifests"), 0o755); err != nil {
			t.Fatal(err)
		}
		for k, v := range edited {
			if err := os.WriteFile(filepath.Join(dir, "manifests", k), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	diff := func(dir string) string {
		t.Helper()
		var out bytes.Buffer
		root := newRootCmd(&out)
		root.SetArgs([]string{"diff", "combo", dir, "--kubeconfig", kubeconfigPath})
		if err := root.ExecuteContext(ctx); err != nil {
			t.Fatalf("rukpakctl diff: %v", err)
		}
		return out.String()
	}
	header := fmt.Sprintf("BundleDeployment combo: release revision 1 (active bundle %s)\n", bd.Status.ActiveBundle)

	t.Run("v0.0.3: two replicas", func(t *testing.T) {
		got := diff(bundle(func(f map[string]string) {
			f["06_deployment.yaml"] = strings.Replace(f["06_deployment.yaml"], "replicas: 1", "replicas: 2", 1)
		}))
		want := header + `change  Deployment combo/combo-operator
          spec.replicas
0 to create, 1 to change, 0 to delete, 6 unchanged
`
		if got != want {
			t.Fatalf("got:\n%s\nwant:\n%s", got, want)
		}
	})

	t.Run("an object added and one dropped", func(t *testing.T) {
		got := diff(bundle(func(f map[string]string) {
			delete(f, "05_cluster_role_binding.yaml")
			f["07_configmap.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: combo-settings\n  namespace: combo\ndata:\n  level: debug\n"
		}))
		want := header + `create  ConfigMap combo/combo-settings
delete  ClusterRoleBinding combo-operator
1 to create, 0 to change, 1 to delete, 6 unchanged
`
		if got != want {
			t.Fatalf("got:\n%s\nwant:\n%s", got, want)
		}
	})

	t.Run("the installed bundle changes nothing", func(t *testing.T) {
		want := header + "0 to create, 0 to change, 0 to delete, 7 unchanged\n"
		if got := diff(bundle(func(map[string]string) {})); got != want {
			t.Fatalf("got:\n%s\nwant:\n%s", got, want)
		}
	})

	t.Run("an unknown BundleDeployment", func(t *testing.T) {
		root := newRootCmd(&bytes.Buffer{})
		root.SetArgs([]string{"diff", "nope", bundle(func(map[string]string) {}), "--kubeconfig", kubeconfigPath})
		err := root.ExecuteContext(ctx)
		if want := `reading BundleDeployment "nope": bundledeployments.core.rukpak.io "nope" not found`; err == nil || err.Error() != want {
			t.Fatalf("got error %v, want %s", err, want)
		}
	})
}

// startProvisioner runs a provisioner of classes against env, recording
// releases in ns, until the test ends.
func startProvisioner(t *testing.T, env *testenv.Env, ns string, classes ...string) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, manager.Options{
		Scheme:                 env.Env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := provisioner.Setup(mgr, provisioner.Options{
		Classes:   classes,
		Namespace: ns,
		Unpacker:  sources.New(unpack.Config{Reader: mgr.GetAPIReader(), Namespace: ns, BaseDir: t.TempDir()}),
		Storage:   &storage.LocalDirectory{RootDirectory: t.TempDir(), BaseURL: "https://content.test"},
	}); err != nil {
		t.Fatal(err)
	}
	mgrCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Logf("manager stopped: %v", err)
		}
	})
}

// adminKubeconfig writes a kubeconfig of a system:masters user of env.
func adminKubeconfig(t *testing.T, env *testenv.Env) string {
	t.Helper()
	user, err := env.Env.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitInstalled waits until bd is Installed, and reads it into bd.
func waitInstalled(t *testing.T, env *testenv.Env, bd *rukpakv1alpha1.BundleDeployment) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: bd.Name}, bd); err != nil {
			t.Fatal(err)
		}
		if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled); c != nil && c.Status == metav1.ConditionTrue {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not installed: %+v", bd.Name, bd.Status.Conditions)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
