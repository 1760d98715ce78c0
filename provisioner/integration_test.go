package provisioner_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/leanmeta"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/provisioner"
	"github.com/rukpak-dev/rukpak/provisioner/bundledeployment"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/storage"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/sources"
)

const namespace = "rukpak-system"

// harness is a real API server with the provisioners of both classes
// running against it, and a real OCI registry serving bundle images.
type harness struct {
	t         *testing.T
	env       *testenv.Env
	c         client.Client
	reg       *testregistry.Registry
	storeDir  string
	unpackDir string
	stop      context.CancelFunc
	done      chan error
	// certValidity and certRenewBefore tune serving certificates (zero:
	// the defaults).
	certValidity, certRenewBefore time.Duration
	// configure, when set, changes the provisioner's options.
	configure func(*provisioner.Options)
	// reconciles counts the reconciles of this harness's managers.
	reconciles *reconcileCounts
}

// setLoggerOnce: controller-runtime's global logger is set once per process
// (setting it concurrently races); each manager logs through its own.
var setLoggerOnce sync.Once

func testLogger() logr.Logger {
	if os.Getenv("RUKPAK_TEST_LOG") != "" {
		return zap.New(zap.UseDevMode(true))
	}
	return logr.Discard()
}

func newHarness(t *testing.T) *harness { return newHarnessWith(t, nil) }

// newHarnessWith is newHarness with the provisioner's options changed by
// configure (also on every restart).
func newHarnessWith(t *testing.T, configure func(*provisioner.Options)) *harness {
	setLoggerOnce.Do(func() { ctrl.SetLogger(testLogger()) })
	env := testenv.Pooled(t)
	h := &harness{t: t, env: env, c: env.Client, reg: testregistry.New(t), storeDir: t.TempDir(), unpackDir: t.TempDir(), configure: configure,
		reconciles: &reconcileCounts{n: map[string]int{}}}
	ctx := context.Background()
	if err := h.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}
	h.start()
	t.Cleanup(h.kill)
	return h
}

// start runs a provisioner manager, as the binary does.
func (h *harness) start() {
	h.t.Helper()
	mgr, err := ctrl.NewManager(leanmeta.Config(h.env.Config), manager.Options{
		Scheme:                 h.env.Env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Every test starts its own manager in this one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Logger:     logr.New(&countingSink{delegate: testLogger().GetSink(), counts: h.reconciles}),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	store := &storage.LocalDirectory{RootDirectory: h.storeDir, BaseURL: "https://content.test"}
	opts := provisioner.Options{
		Classes:   []string{rukpakv1alpha1.ProvisionerClassPlain, rukpakv1alpha1.ProvisionerClassRegistry, rukpakv1alpha1.ProvisionerClassHelm},
		Namespace: namespace,
		Unpacker:  sources.New(unpack.Config{Reader: mgr.GetAPIReader(), Namespace: namespace, BaseDir: h.unpackDir}),
		Storage:   store,
		// As the binary: release records and Helm on the plain config.
		RESTConfig: h.env.Config,

		CertValidity:    h.certValidity,
		CertRenewBefore: h.certRenewBefore,
	}
	if h.configure != nil {
		h.configure(&opts)
	}
	if err := provisioner.Setup(mgr, opts); err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- mgr.Start(ctx) }()
}

// kill stops the manager wherever it is, like a crashed process.
func (h *harness) kill() {
	if h.stop == nil {
		return
	}
	h.stop()
	if err := <-h.done; err != nil {
		h.t.Logf("manager stopped: %v", err)
	}
	h.stop = nil
}

// pushBundle pushes an image whose manifests/ holds files and returns a
// source that unpacks it.
func (h *harness) pushBundle(tag string, files map[string]string) rukpakv1alpha1.BundleSource {
	h.t.Helper()
	h.reg.MustPush(h.t, h.reg.Ref("bundles:"+tag), testregistry.Image(h.t, testregistry.Layer(h.t, files)))
	return rukpakv1alpha1.BundleSource{
		Type:  rukpakv1alpha1.SourceTypeImage,
		Image: &rukpakv1alpha1.ImageSource{Ref: h.reg.Ref("bundles:" + tag), CertificateData: string(h.reg.CAPEM)},
	}
}

// eventually polls f until it returns nil, for up to testenv.WaitTimeout:
// tests run in parallel, each with its own API server, on machines with few
// cores that may be busy with more. It polls less often as the wait
// lengthens (testenv.Poll): many polls read large objects.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	eventuallyWithin(t, testenv.WaitTimeout, what, f)
}

// eventuallyWithin is eventually with its own deadline, for steps that
// take longer still.
func eventuallyWithin(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(d)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		testenv.Poll(start)
	}
	t.Fatalf("timed out after %s waiting for %s: %v", d, what, err)
}

func (h *harness) bundle(name string) *rukpakv1alpha1.Bundle {
	b := &rukpakv1alpha1.Bundle{}
	if err := h.c.Get(context.Background(), client.ObjectKey{Name: name}, b); err != nil {
		h.t.Fatalf("getting bundle %s: %v", name, err)
	}
	return b
}

// getBundle returns nil and no error once the bundle is gone.
func (h *harness) getBundle(name string) (*rukpakv1alpha1.Bundle, error) {
	b := &rukpakv1alpha1.Bundle{}
	err := h.c.Get(context.Background(), client.ObjectKey{Name: name}, b)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err == nil {
		return b, fmt.Errorf("bundle %s still exists", name)
	}
	return nil, err
}

func (h *harness) waitBundle(name, phase, reason, msgPart string) *rukpakv1alpha1.Bundle {
	h.t.Helper()
	var b *rukpakv1alpha1.Bundle
	eventually(h.t, "bundle "+name+" phase "+phase, func() error {
		b = h.bundle(name)
		c := conditions.Get(b.Status.Conditions, rukpakv1alpha1.TypeUnpacked)
		if b.Status.Phase != phase || c == nil || c.Reason != reason || !strings.Contains(c.Message, msgPart) {
			return fmt.Errorf("phase %q, condition %+v", b.Status.Phase, c)
		}
		return nil
	})
	return b
}

func (h *harness) bd(name string) *rukpakv1alpha1.BundleDeployment {
	bd := &rukpakv1alpha1.BundleDeployment{}
	if err := h.c.Get(context.Background(), client.ObjectKey{Name: name}, bd); err != nil {
		h.t.Fatalf("getting bundle deployment %s: %v", name, err)
	}
	return bd
}

// updateBD edits a bundle deployment's latest version, again if the
// provisioner wrote it (its status) in between.
func (h *harness) updateBD(name string, edit func(*rukpakv1alpha1.BundleDeployment)) {
	h.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		bd := h.bd(name)
		edit(bd)
		return h.c.Update(context.Background(), bd)
	})
	if err != nil {
		h.t.Fatalf("updating bundle deployment %s: %v", name, err)
	}
}

func (h *harness) waitBD(name, typ string, status metav1.ConditionStatus, reason, msgPart string) *rukpakv1alpha1.BundleDeployment {
	h.t.Helper()
	var bd *rukpakv1alpha1.BundleDeployment
	eventually(h.t, fmt.Sprintf("bundle deployment %s %s=%s/%s", name, typ, status, reason), func() error {
		bd = h.bd(name)
		c := conditions.Get(bd.Status.Conditions, typ)
		if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, msgPart) {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	return bd
}

func configMap(name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: default\ndata:\n  value: %q\n", name, value)
}

func newBD(name string, src rukpakv1alpha1.BundleSource) *rukpakv1alpha1.BundleDeployment {
	return &rukpakv1alpha1.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: rukpakv1alpha1.BundleDeploymentSpec{
			ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
			Template: rukpakv1alpha1.BundleTemplate{
				Metadata: rukpakv1alpha1.TemplateMetadata{Labels: map[string]string{"app": name}},
				Spec:     rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Source: src},
			},
		},
	}
}

func (h *harness) getCM(name string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	err := h.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, cm)
	return cm, err
}

// deleteCMAndAwaitRestore deletes ConfigMap name (an installed object) and
// waits until drift correction has created it again.
func (h *harness) deleteCMAndAwaitRestore(t *testing.T, name string) {
	t.Helper()
	cm, err := h.getCM(name)
	testenv.MustNotError(t, err, "reading %s", name)
	testenv.MustNotError(t, h.c.Delete(context.Background(), cm), "deleting %s", name)
	eventually(t, name+" restored", func() error {
		cm, err := h.getCM(name)
		if err != nil {
			return err
		}
		if !cm.DeletionTimestamp.IsZero() {
			return fmt.Errorf("still being deleted")
		}
		return nil
	})
}

func TestIntegrationBundles(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()

	t.Run("valid image bundle unpacks and records its digest", func(t *testing.T) {
		src := h.pushBundle("valid", map[string]string{"manifests/cm.yaml": configMap("valid", "1")})
		b := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "valid"}, Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Source: src}}
		if err := h.c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		b = h.waitBundle("valid", rukpakv1alpha1.PhaseUnpacked, rukpakv1alpha1.ReasonUnpackSuccessful, "")
		if b.Status.ResolvedSource == nil || b.Status.ResolvedSource.Image == nil || !strings.Contains(b.Status.ResolvedSource.Image.Ref, "@sha256:") {
			t.Errorf("resolvedSource is not pinned to a digest: %+v", b.Status.ResolvedSource)
		}
		if b.Status.ContentURL != "https://content.test/bundles/valid.tgz" {
			t.Errorf("contentURL = %q", b.Status.ContentURL)
		}
		if b.Status.ObservedGeneration != b.Generation {
			t.Errorf("observedGeneration %d, generation %d", b.Status.ObservedGeneration, b.Generation)
		}
		if !containsString(b.Finalizers, rukpakv1alpha1.FinalizerDeleteCachedBundle) {
			t.Errorf("finalizer missing: %v", b.Finalizers)
		}
	})

	t.Run("bundle of another class is left alone", func(t *testing.T) {
		src := h.pushBundle("other", map[string]string{"manifests/cm.yaml": configMap("other", "1")})
		b := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "other-class"}, Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: "someone-else", Source: src}}
		if err := h.c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		// A bundle of ours created after it is handled, so the provisioner
		// had its chance to (wrongly) touch the other one.
		mine := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "after-other"}, Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Source: src}}
		if err := h.c.Create(ctx, mine); err != nil {
			t.Fatal(err)
		}
		h.waitBundle("after-other", rukpakv1alpha1.PhaseUnpacked, rukpakv1alpha1.ReasonUnpackSuccessful, "")
		got := h.bundle("other-class")
		if got.Status.Phase != "" || len(got.Finalizers) != 0 || len(got.Status.Conditions) != 0 {
			t.Errorf("bundle of another class was touched: %+v", got)
		}
	})

	invalid := []struct {
		name  string
		files map[string]string
		msg   string
	}{
		{"no-manifests", map[string]string{"README.md": "hello"}, "readdir manifests: file does not exist"},
		{"empty", map[string]string{"manifests/empty.yaml": "# nothing\n"}, "found zero objects: plain+v0 bundles are required to contain at least one object"},
		{"subdir", map[string]string{"manifests/cm.yaml": configMap("x", "1"), "manifests/crds/crd.yaml": configMap("y", "1")}, `manifests/crds`},
	}
	for _, tc := range invalid {
		t.Run("invalid bundle "+tc.name, func(t *testing.T) {
			src := h.pushBundle(tc.name, tc.files)
			b := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: tc.name}, Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Source: src}}
			if err := h.c.Create(ctx, b); err != nil {
				t.Fatal(err)
			}
			h.waitBundle(tc.name, rukpakv1alpha1.PhaseFailing, rukpakv1alpha1.ReasonUnpackFailed, tc.msg)
		})
	}

	t.Run("deleting a bundle removes its stored content", func(t *testing.T) {
		b := h.bundle("valid")
		if err := h.c.Delete(ctx, b); err != nil {
			t.Fatal(err)
		}
		eventually(t, "bundle gone", func() error {
			err := h.c.Get(ctx, client.ObjectKey{Name: "valid"}, b)
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there: %w", err)
		})
		store := &storage.LocalDirectory{RootDirectory: h.storeDir}
		if _, err := store.Load(ctx, b); err == nil {
			t.Errorf("content of a deleted bundle is still stored")
		}
	})
}

func TestIntegrationBundleDeployments(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()

	v1 := h.pushBundle("app-v1", map[string]string{"manifests/cm.yaml": configMap("app-config", "v1") + "---\n" + configMap("app-extra", "v1")})
	bd := newBD("app", v1)
	if err := h.c.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}

	var firstBundle string
	t.Run("installs the bundle's objects with owner labels", func(t *testing.T) {
		bd := h.waitBD("app", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
		if !conditions.Is(bd.Status.Conditions, rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionTrue) {
			t.Errorf("HasValidBundle not true: %+v", bd.Status.Conditions)
		}
		firstBundle = bd.Status.ActiveBundle
		if !strings.HasPrefix(firstBundle, "app-") {
			t.Fatalf("activeBundle = %q", firstBundle)
		}
		b := h.bundle(firstBundle)
		if b.Labels["app"] != "app" || b.Labels[rukpakv1alpha1.LabelOwnerName] != "app" || b.Labels[rukpakv1alpha1.LabelBundleTemplateHash] == "" {
			t.Errorf("generated bundle labels: %v", b.Labels)
		}
		if !metav1.IsControlledBy(b, bd) {
			t.Errorf("generated bundle is not controlled by the bundle deployment")
		}
		cm, err := h.getCM("app-config")
		if err != nil {
			t.Fatal(err)
		}
		if cm.Labels[rukpakv1alpha1.LabelOwnerKind] != "BundleDeployment" || cm.Labels[rukpakv1alpha1.LabelOwnerName] != "app" {
			t.Errorf("owner labels: %v", cm.Labels)
		}
		if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != bd.UID {
			t.Errorf("owner references: %+v", cm.OwnerReferences)
		}
		h.waitBD("app", rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "")
		if bd.Spec.Template.Metadata.Labels[rukpakv1alpha1.LabelOwnerName] != "" {
			t.Errorf("the bundle deployment's own template was modified: %v", bd.Spec.Template.Metadata.Labels)
		}
	})

	t.Run("a deleted installed object is restored", func(t *testing.T) {
		h.deleteCMAndAwaitRestore(t, "app-extra")
	})

	t.Run("an edited installed object is restored", func(t *testing.T) {
		cm, _ := h.getCM("app-config")
		cm.Data["value"] = "tampered"
		if err := h.c.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		eventually(t, "app-config restored", func() error {
			cm, err := h.getCM("app-config")
			if err != nil {
				return err
			}
			if cm.Data["value"] != "v1" {
				return fmt.Errorf("value %q", cm.Data["value"])
			}
			return nil
		})
	})

	t.Run("a template pointing at a missing tag keeps the old content", func(t *testing.T) {
		bad := v1.DeepCopy()
		bad.Image.Ref = h.reg.Ref("bundles:does-not-exist")
		h.updateBD("app", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = *bad })
		bd := h.waitBD("app", rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnpackFailed, "does-not-exist")
		if bd.Status.ActiveBundle != firstBundle {
			t.Errorf("activeBundle moved to %q", bd.Status.ActiveBundle)
		}
		h.bundle(firstBundle) // still there
		if cm, err := h.getCM("app-config"); err != nil || cm.Data["value"] != "v1" {
			t.Errorf("old content not kept: %v %v", cm.Data, err)
		}
		if !conditions.Is(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue) {
			t.Errorf("Installed changed: %+v", bd.Status.Conditions)
		}
	})

	t.Run("a good template pivots and deletes the old bundle", func(t *testing.T) {
		v2 := h.pushBundle("app-v2", map[string]string{"manifests/cm.yaml": configMap("app-config", "v2")})
		h.updateBD("app", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = v2 })
		eventually(t, "pivot to v2", func() error {
			bd := h.bd("app")
			if bd.Status.ActiveBundle == firstBundle || !conditions.Is(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue) {
				return fmt.Errorf("active %q, conditions %+v", bd.Status.ActiveBundle, bd.Status.Conditions)
			}
			return nil
		})
		eventually(t, "old bundles deleted", func() error {
			list := &rukpakv1alpha1.BundleList{}
			if err := h.c.List(ctx, list, client.MatchingLabels{rukpakv1alpha1.LabelOwnerName: "app"}); err != nil {
				return err
			}
			if len(list.Items) != 1 {
				return fmt.Errorf("%d bundles", len(list.Items))
			}
			return nil
		})
		if cm, err := h.getCM("app-config"); err != nil || cm.Data["value"] != "v2" {
			t.Errorf("new content not installed: %v %v", cm.Data, err)
		}
		// app-extra is not in v2: the upgrade removes it.
		eventually(t, "app-extra removed", func() error {
			if _, err := h.getCM("app-extra"); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there: %w", err)
			}
			return nil
		})
	})

	t.Run("a bundle needing a CRD from another bundle installs once the provider is installed", func(t *testing.T) {
		cr := "apiVersion: widgets.example.com/v1\nkind: Widget\nmetadata:\n  name: w1\n  namespace: default\nspec:\n  size: 3\n"
		consumer := h.pushBundle("consumer", map[string]string{"manifests/widget.yaml": cr})
		if err := h.c.Create(ctx, newBD("consumer", consumer)); err != nil {
			t.Fatal(err)
		}
		h.waitBD("consumer", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInstallFailed, "required resource not found")
		// Nothing is installed: Healthy says so, in RukPak v0.16's words.
		h.waitBDExact("consumer", rukpakv1alpha1.TypeHealthy, metav1.ConditionFalse, rukpakv1alpha1.ReasonInstallationStatusFalse, "Installed condition is false")

		provider := h.pushBundle("provider", map[string]string{"manifests/crd.yaml": widgetCRD})
		if err := h.c.Create(ctx, newBD("provider", provider)); err != nil {
			t.Fatal(err)
		}
		h.waitBD("provider", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
		h.waitBD("consumer", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
		w := &unstructured.Unstructured{}
		w.SetAPIVersion("widgets.example.com/v1")
		w.SetKind("Widget")
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "w1"}, w); err != nil {
			t.Errorf("widget not installed: %v", err)
		}
	})

	t.Run("a namespace on a cluster-scoped object is ignored, as Helm does", func(t *testing.T) {
		role := "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: sloppy-role\n  namespace: default\nrules: []\n"
		src := h.pushBundle("sloppy", map[string]string{"manifests/role.yaml": role})
		if err := h.c.Create(ctx, newBD("sloppy", src)); err != nil {
			t.Fatal(err)
		}
		h.waitBD("sloppy", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
		h.waitBD("sloppy", rukpakv1alpha1.TypeHealthy, metav1.ConditionTrue, rukpakv1alpha1.ReasonHealthy, "")
	})

	t.Run("a bundle shipping a CRD and its custom resources installs in one go", func(t *testing.T) {
		crd := strings.NewReplacer("widgets", "gadgets", "Widget", "Gadget", "widget", "gadget").Replace(widgetCRD)
		cr := "apiVersion: gadgets.example.com/v1\nkind: Gadget\nmetadata:\n  name: g1\n  namespace: default\n"
		src := h.pushBundle("gadgets", map[string]string{"manifests/crd.yaml": crd, "manifests/gadget.yaml": cr})
		if err := h.c.Create(ctx, newBD("gadgets", src)); err != nil {
			t.Fatal(err)
		}
		h.waitBD("gadgets", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
		g := &unstructured.Unstructured{}
		g.SetAPIVersion("gadgets.example.com/v1")
		g.SetKind("Gadget")
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "g1"}, g); err != nil {
			t.Errorf("gadget not installed: %v", err)
		}
	})

	t.Run("generated bundles are capped", func(t *testing.T) {
		bad := v1.DeepCopy()
		bad.Image.Ref = h.reg.Ref("bundles:missing-0")
		if err := h.c.Create(ctx, newBD("capped", *bad)); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 7; i++ {
			h.waitBD("capped", rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnpackFailed, fmt.Sprintf("missing-%d", i-1))
			h.updateBD("capped", func(bd *rukpakv1alpha1.BundleDeployment) {
				bd.Spec.Template.Spec.Source.Image.Ref = h.reg.Ref(fmt.Sprintf("bundles:missing-%d", i))
			})
		}
		h.waitBD("capped", rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnpackFailed, "missing-7")
		list := &rukpakv1alpha1.BundleList{}
		if err := h.c.List(ctx, list, client.MatchingLabels{rukpakv1alpha1.LabelOwnerName: "capped"}); err != nil {
			t.Fatal(err)
		}
		live := 0
		for _, b := range list.Items {
			if b.DeletionTimestamp.IsZero() {
				live++
			}
		}
		if live > bundledeployment.DefaultMaxBundles {
			t.Errorf("%d generated bundles, want at most %d", live, bundledeployment.DefaultMaxBundles)
		}
	})

	t.Run("deleting the bundle deployment removes everything it installed", func(t *testing.T) {
		bd := h.bd("app")
		active := bd.Status.ActiveBundle
		if err := h.c.Delete(ctx, bd); err != nil {
			t.Fatal(err)
		}
		eventually(t, "bundle deployment gone", func() error {
			err := h.c.Get(ctx, client.ObjectKey{Name: "app"}, bd)
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there: %w", err)
		})
		if _, err := h.getCM("app-config"); !apierrors.IsNotFound(err) {
			t.Errorf("installed ConfigMap still there: %v", err)
		}
		eventually(t, "generated bundle gone", func() error {
			err := h.c.Get(ctx, client.ObjectKey{Name: active}, &rukpakv1alpha1.Bundle{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there: %w", err)
		})
	})
}

func TestIntegrationRestartConverges(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	var files = map[string]string{}
	var docs []string
	for i := range 200 {
		docs = append(docs, configMap(fmt.Sprintf("many-%03d", i), "x"))
	}
	files["manifests/many.yaml"] = strings.Join(docs, "---\n")
	src := h.pushBundle("many", files)
	if err := h.c.Create(ctx, newBD("many", src)); err != nil {
		t.Fatal(err)
	}
	// Kill the provisioner as soon as the install has started.
	eventually(t, "install started", func() error {
		if _, err := h.getCM("many-000"); err != nil {
			return err
		}
		return nil
	})
	h.kill()
	h.start()
	h.waitBD("many", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	for _, name := range []string{"many-000", "many-199"} {
		if _, err := h.getCM(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.widgets.example.com
spec:
  group: widgets.example.com
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`
