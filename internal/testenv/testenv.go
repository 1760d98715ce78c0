// Package testenv starts a real kube-apiserver and etcd (controller-runtime's
// envtest) with this project's CRDs installed, for integration tests.
//
// The control-plane binaries come from KUBEBUILDER_ASSETS when it is set (the
// Makefile sets it); otherwise hack/testbin.sh is run to find or build them,
// so a plain `go test ./...` works too.
package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// RepoRoot is the root of this checkout.
func RepoRoot() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// AssetsDir returns the directory holding etcd and kube-apiserver (and, once
// built, the rest of the local control plane).
func AssetsDir(tb testing.TB) string {
	tb.Helper()
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	cmd := exec.Command("bash", filepath.Join(RepoRoot(), "hack", "testbin.sh"), "envtest")
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("finding control-plane binaries with hack/testbin.sh: %v", err)
	}
	return strings.TrimSpace(out.String())
}

// Scheme returns a scheme with the built-in types, CRDs and this project's API.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := rukpakv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// Env is a running API server with the CRDs installed.
type Env struct {
	Config *rest.Config
	Client client.Client
	Env    *envtest.Environment
}

// Options change how the environment starts.
type Options struct {
	// Webhooks installs admission webhook configurations served by the test.
	Webhooks envtest.WebhookInstallOptions
}

// Start starts an API server for tb and stops it when tb ends.
func Start(tb testing.TB, opts ...Options) *Env {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs a kube-apiserver: skipped in -short mode")
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: AssetsDir(tb),
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "manifests", "base", "crd")},
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme(),
		// envtest's defaults (20 s to start, 10 s for the CRDs to be
		// served) are for one API server on an idle machine; packages run
		// their tests in parallel, each test with its own API server and
		// etcd, on machines with two cores.
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
		CRDInstallOptions:        envtest.CRDInstallOptions{MaxTime: 2 * time.Minute},
	}
	for _, o := range opts {
		env.WebhookInstallOptions = o.Webhooks
		if env.WebhookInstallOptions.MaxTime == 0 {
			env.WebhookInstallOptions.MaxTime = 2 * time.Minute
		}
	}
	cfg, err := env.Start()
	if err != nil {
		tb.Fatalf("starting envtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := env.Stop(); err != nil {
			tb.Logf("stopping envtest: %v", err)
		}
	})
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		tb.Fatalf("creating client: %v", err)
	}
	return &Env{Config: cfg, Client: c, Env: env}
}

// MustNotError fails tb with context when err is not nil.
func MustNotError(tb testing.TB, err error, what string, args ...any) {
	tb.Helper()
	if err != nil {
		tb.Fatalf("%s: %v", fmt.Sprintf(what, args...), err)
	}
}

// Kubectl is the kubectl built with the control plane (hack/testbin.sh), of
// the API server's version, whatever else is on PATH.
func Kubectl(tb testing.TB) string {
	tb.Helper()
	p := filepath.Join(AssetsDir(tb), "kubectl")
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("kubectl is not among the control-plane binaries (run hack/testbin.sh): %v", err)
	}
	return p
}
