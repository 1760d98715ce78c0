// Package testenv starts a real kube-apiserver and etcd (controller-runtime's
// envtest) with this project's CRDs installed, for integration tests.
//
// The control-plane binaries come from KUBEBUILDER_ASSETS when it is set (the
// Makefile sets it); otherwise hack/testbin.sh finds them (make test-deps
// builds them; a test never does, see Testbin).
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// WaitTimeout is how long a test waits for a condition (an API server to
// start, an object to reach a state) before it gives up. A wait ends as
// soon as its condition holds, so the deadline costs time only when a test
// fails; it is long so that no verdict depends on how busy the machine is
// (a two-core machine running make test beside other work takes minutes
// for what an idle one does in seconds). go test's -timeout (make test's
// GO_TEST_TIMEOUT) is well above it.
const WaitTimeout = 10 * time.Minute

// RepoRoot is the root of this checkout.
func RepoRoot() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// SharedTestdata returns elem under the shared test data (real bundles,
// charts, catalogs and the fleet, read-only), which lies beside the
// checkout as ../shared/testdata, or beside its parent for a worktree one
// level deeper. When neither exists it returns the first, so the error of
// whatever reads it names the expected place.
func SharedTestdata(elem ...string) string {
	dir := filepath.Dir(RepoRoot())
	for range 2 {
		if fi, err := os.Stat(filepath.Join(dir, "shared", "testdata")); err == nil && fi.IsDir() {
			return filepath.Join(append([]string{dir, "shared", "testdata"}, elem...)...)
		}
		dir = filepath.Dir(dir)
	}
	return filepath.Join(append([]string{filepath.Dir(RepoRoot()), "shared", "testdata"}, elem...)...)
}

// AssetsDir returns the directory holding etcd and kube-apiserver (and, once
// built, the rest of the local control plane).
func AssetsDir(tb testing.TB) string {
	tb.Helper()
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	return MustTestbin(tb, "envtest")
}

// Testbin returns the directory `hack/testbin.sh target` prints (envtest,
// all, node, helm, cert-manager) when what it holds is built. It never
// builds: a build takes minutes on a cold cache, which would count against
// the test's timeout. When something is missing, the error names it and the
// command that builds it (make test-deps).
func Testbin(target string) (string, error) {
	cmd := exec.Command("bash", filepath.Join(RepoRoot(), "hack", "testbin.sh"), "--check", target)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/testbin.sh --check %s: %w: %s", target, err, strings.TrimSpace(errb.String()))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[len(lines)-1], nil
}

// MustTestbin is Testbin that fails tb at once when something is missing.
func MustTestbin(tb testing.TB, target string) string {
	tb.Helper()
	dir, err := Testbin(target)
	if err != nil {
		tb.Fatal(err)
	}
	return dir
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
	env, err := start(AssetsDir(tb), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := env.Env.Stop(); err != nil {
			tb.Logf("stopping envtest: %v", err)
		}
	})
	return env
}

func start(assets string, opts ...Options) (*Env, error) {
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "manifests", "base", "crd")},
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme(),
		// envtest's defaults (20 s to start, 10 s for the CRDs to be
		// served) are for one API server on an idle machine; packages run
		// their tests in parallel, each test with its own API server and
		// etcd, on machines with two cores that may be busy with more.
		ControlPlaneStartTimeout: WaitTimeout,
		ControlPlaneStopTimeout:  WaitTimeout,
		CRDInstallOptions:        envtest.CRDInstallOptions{MaxTime: WaitTimeout},
	}
	if err := lighten(env, assets); err != nil {
		return nil, err
	}
	for _, o := range opts {
		env.WebhookInstallOptions = o.Webhooks
		if env.WebhookInstallOptions.MaxTime == 0 {
			env.WebhookInstallOptions.MaxTime = WaitTimeout
		}
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return &Env{Config: cfg, Client: c, Env: env}, nil
}

// shared is the API server of Shared, one per test binary.
var shared struct {
	mu      sync.Mutex
	inMain  bool // RunShared is running the tests
	env     *Env
	err     error
	started bool
}

// RunShared runs a package's tests (its TestMain calls
// os.Exit(testenv.RunShared(m))) and stops the API servers of Shared and
// Pooled after them, if any were started: a test binary that exits leaves
// its API servers and etcds running otherwise.
func RunShared(m *testing.M) int {
	shared.mu.Lock()
	shared.inMain = true
	shared.mu.Unlock()
	code := m.Run()
	stopPool()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.env != nil {
		if err := shared.env.Env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the shared envtest: %v\n", err)
		}
		shared.env = nil
	}
	return code
}

// Shared returns the API server the tests of this test binary share,
// started by the first caller: starting one costs seconds of CPU, most of
// what a short integration test costs. Tests that share it keep to
// namespaces of their own (Namespace) and cluster-scoped names no other
// test uses. The package's TestMain must run its tests with RunShared.
func Shared(tb testing.TB) *Env {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs a kube-apiserver: skipped in -short mode")
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.inMain {
		tb.Fatal("testenv.Shared: the package's TestMain must run its tests with testenv.RunShared, which stops the shared API server")
	}
	if !shared.started {
		shared.started = true
		shared.env, shared.err = start(AssetsDir(tb))
	}
	if shared.err != nil {
		tb.Fatalf("the shared API server: %v", shared.err)
	}
	return shared.env
}

// namespaces numbers the namespaces Namespace creates in this process.
var namespaces atomic.Int64

// Namespace creates a namespace named after prefix, unique in this process
// (prefix-N), and returns its name. It is left in place: without a
// controller manager a deleted namespace never goes away, and its objects
// would only cost the API server the work of deleting them.
func Namespace(tb testing.TB, env *Env, prefix string) string {
	tb.Helper()
	name := fmt.Sprintf("%s-%d", prefix, namespaces.Add(1))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		tb.Fatalf("creating namespace %s: %v", name, err)
	}
	return name
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
		tb.Fatalf("kubectl is not among the control-plane binaries (run make test-deps): %v", err)
	}
	return p
}

// Poll pauses between polls of a wait that began at start: 100 ms at
// first, then a tenth of the time waited so far, at most a second. A
// condition that holds soon is seen as soon as before; a long wait (minutes
// on a loaded machine) polls ten times less often, so the waits of tests
// running at once do not burn the CPU the API servers they wait on need:
// each poll is requests the API server serves, often of large objects,
// and the waits lengthen with the load.
func Poll(start time.Time) {
	time.Sleep(PollPause(time.Since(start)))
}

// PollPause is the pause Poll makes after waiting elapsed.
func PollPause(elapsed time.Duration) time.Duration {
	return min(max(elapsed/10, 100*time.Millisecond), time.Second)
}
