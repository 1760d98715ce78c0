package provisioner_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/provisioner"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/storage"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/sources"
)

// BenchmarkUnchangedReconcile measures what one reconcile of an installed,
// unchanged BundleDeployment costs the provisioner: a real operator
// (prometheus-0.47.0, registry+v1, ~1 MiB of CRDs) installed with a config
// (so its objects are converted), then reconciled on request (an
// annotation) again and again. B/op is the bytes this process allocated
// per reconcile: the provisioner's and the benchmark's own few reads of the
// BundleDeployment while it waits for each.
func BenchmarkUnchangedReconcile(b *testing.B) {
	dir := "../../shared/testdata/registry-v1/prometheus-0.47.0"
	if _, err := os.Stat(dir); err != nil {
		b.Skipf("shared test data not available: %v", err)
	}
	setLoggerOnce.Do(func() { ctrl.SetLogger(testLogger()) })
	env := testenv.Start(b)
	reg := testregistry.New(b)
	ctx := context.Background()
	c := env.Client
	for _, ns := range []string{namespace, "bench-prom"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
	}
	mgr, err := ctrl.NewManager(env.Config, manager.Options{
		Scheme:                 env.Env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := provisioner.Setup(mgr, provisioner.Options{
		Classes:   []string{rukpakv1alpha1.ProvisionerClassRegistry},
		Namespace: namespace,
		Unpacker:  sources.New(unpack.Config{Reader: mgr.GetAPIReader(), Namespace: namespace, BaseDir: b.TempDir()}),
		Storage:   &storage.LocalDirectory{RootDirectory: b.TempDir(), BaseURL: "https://content.test"},
	}); err != nil {
		b.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Logf("manager stopped: %v", err)
		}
	})

	reg.MustPush(b, reg.Ref("prometheus:0.47.0"), testregistry.Image(b, testregistry.LayerFromDir(b, dir, "")))
	bd := newBD("bench-prom", rukpakv1alpha1.BundleSource{
		Type:  rukpakv1alpha1.SourceTypeImage,
		Image: &rukpakv1alpha1.ImageSource{Ref: reg.Ref("prometheus:0.47.0"), CertificateData: string(reg.CAPEM)},
	})
	bd.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	bd.Spec.Template.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	bd.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(`{"installNamespace":"bench-prom","watchNamespaces":["bench-prom"]}`)}
	if err := c.Create(ctx, bd); err != nil {
		b.Fatal(err)
	}
	benchWait(b, c, func(bd *rukpakv1alpha1.BundleDeployment) bool {
		cond := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled)
		return cond != nil && cond.Status == metav1.ConditionTrue
	})
	request := func(v string) {
		if err := c.Patch(ctx, &rukpakv1alpha1.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: bd.Name}},
			client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+rukpakv1alpha1.AnnotationReconcileRequestedAt+`":"`+v+`"}}}`))); err != nil {
			b.Fatal(err)
		}
		benchWait(b, c, func(bd *rukpakv1alpha1.BundleDeployment) bool { return bd.Status.LastHandledReconcileAt == v })
	}
	// Settled: the reconcile after the install notes what it found.
	request("settle-1")
	request("settle-2")

	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		request(fmt.Sprint("unchanged-", i))
	}
}

// benchWait polls BundleDeployment bench-prom until ok says so.
func benchWait(b *testing.B, c client.Client, ok func(*rukpakv1alpha1.BundleDeployment) bool) {
	b.Helper()
	deadline := time.Now().Add(testenv.WaitTimeout)
	for {
		bd := &rukpakv1alpha1.BundleDeployment{}
		err := c.Get(context.Background(), client.ObjectKey{Name: "bench-prom"}, bd)
		if err == nil && ok(bd) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("waiting for BundleDeployment bench-prom: %v, conditions %v", err, bd.Status.Conditions)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
