// Package e2e plays the seeds' story as a cluster admin would, with kubectl
// against a running cluster: the local control plane that TestMain starts
// (make test-e2e), or any cluster that already runs rukpak (E2E_KUBECONFIG;
// see make kind-e2e).
package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rukpak-dev/rukpak/internal/devenv"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// suite is what every test talks to.
var suite struct {
	kubeconfig string
	// local is set when TestMain started the environment itself; tests
	// that restart processes need it.
	local *devenv.Env
	// contentCA trusts the content server.
	contentCA []byte
	// node is set in the real-node mode (E2E_NODE=1).
	node *nodeSuite
	// realPods is set when workloads run as real containers (the real-node
	// mode, or E2E_REAL_PODS=1 for another cluster that imported the test
	// images): bundles then use the locally built test images, and the
	// tests that only real pods can show run.
	realPods bool
	// buildDir holds what the tests build from this checkout (rukpakctl);
	// removed after the tests.
	buildDir string
}

func TestMain(m *testing.M) {
	flag.Parse()
	// The shared tests mostly wait on the cluster (the kubelet, probes,
	// back-offs), not on this machine's CPUs: all of them at once, not
	// GOMAXPROCS at a time, unless -test.parallel says otherwise.
	passed := false
	flag.Visit(func(f *flag.Flag) { passed = passed || f.Name == "test.parallel" })
	if !passed {
		_ = flag.Set("test.parallel", "32")
	}
	dir, err := os.MkdirTemp("", "rukpak-e2e-build-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	suite.buildDir = dir
	if !testing.Short() {
		// Built while the cluster starts; the tests that run it wait.
		go func() { _, _ = rukpakctl() }()
	}
	code := run(m)
	if !testing.Short() {
		_, _ = rukpakctl() // not writing into dir any more
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// installation orders the tests around rukpak's own installation. Most
// tests leave it alone: they are shared, and run at the same time, each
// with BundleDeployments and namespaces of its own. A test that restarts,
// scales, re-overlays, re-flags or upgrades rukpak's pods disturbs it and
// runs alone: the installs in flight, the metrics and the content URLs of
// the others would change under them.
var installation sync.RWMutex

// shared marks a test that leaves rukpak's installation alone: it runs in
// parallel with the other shared tests, never beside one that disturbs
// the installation.
func shared(t *testing.T) {
	t.Helper()
	t.Parallel()
	installation.RLock()
	t.Cleanup(installation.RUnlock)
}

// disturbs marks a test, or a subtest of a sequential test, that changes
// rukpak's installation. Such tests are sequential (no t.Parallel, no
// shared): go test runs a package's sequential top-level tests one after
// another before its parallel ones, so these run first, alone, and the
// shared ones after them; disturbs fails a test that would overlap another.
func disturbs(t *testing.T) {
	t.Helper()
	if !installation.TryLock() {
		t.Fatal("another test is using rukpak's installation: a test that disturbs it must be sequential (no t.Parallel, no shared)")
	}
	t.Cleanup(installation.Unlock)
}

// turns serialises the shared tests that install the same bundle.
var turns sync.Map // bundle name -> *sync.Mutex

// takeTurns makes t wait for the other tests that install the same
// bundles: a bundle's cluster-scoped objects (the namespace it creates, its
// CRDs and ClusterRoles) belong to one installation at a time.
func takeTurns(t *testing.T, bundles ...string) {
	t.Helper()
	// In one order, so two tests never hold one each of the same two.
	for _, b := range slices.Sorted(slices.Values(bundles)) {
		mu, _ := turns.LoadOrStore(b, &sync.Mutex{})
		mu.(*sync.Mutex).Lock()
		t.Cleanup(mu.(*sync.Mutex).Unlock)
	}
}

func run(m *testing.M) int {
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode")
		return m.Run()
	}
	suite.realPods = os.Getenv("E2E_REAL_PODS") == "1"
	if os.Getenv("E2E_NODE") == "1" {
		return runNode(m)
	}
	if kc := os.Getenv("E2E_KUBECONFIG"); kc != "" {
		suite.kubeconfig = kc
		if ca := os.Getenv("E2E_CONTENT_CA"); ca != "" {
			data, err := os.ReadFile(ca)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			suite.contentCA = data
		}
		return m.Run()
	}

	root := testenv.RepoRoot()
	binDir := os.Getenv("RUKPAK_BIN_DIR")
	if binDir == "" {
		// This checkout's binaries, built once for the suite into its own
		// directory.
		binDir = filepath.Join(suite.buildDir, "bin")
		cmd := exec.Command("go", "build", "-o", binDir+"/", "./cmd/...")
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stdout, os.Stderr
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building binaries:", err)
			return 1
		}
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if _, err := os.Stat(filepath.Join(assets, "kwokctl")); err != nil {
		if assets, err = testenv.Testbin("all"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	// The admin's kubectl: the one built with the control plane.
	_ = os.Setenv("PATH", assets+string(os.PathListSeparator)+os.Getenv("PATH"))
	state, err := os.MkdirTemp("", "rukpak-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Ports of its own, so that the suite runs beside make run (which
	// keeps the fixed ones) or another checkout's suite.
	addrs, err := devenv.FreeAddresses()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*testenv.WaitTimeout)
	defer cancel()
	env, err := devenv.Up(ctx, devenv.Options{RepoRoot: root, Assets: assets, BinDir: binDir, StateDir: state, Name: "rukpak-e2e", Out: os.Stdout, Addresses: addrs})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the local environment:", err)
		return 1
	}
	suite.local = env
	suite.kubeconfig = env.Kubeconfig
	code := m.Run()
	if code != 0 {
		for _, p := range []*devenv.Process{env.Provisioner, env.Webhook} {
			if data, err := os.ReadFile(p.LogPath); err == nil {
				lines := strings.Split(string(data), "\n")
				fmt.Printf("---- last lines of %s ----\n%s\n", p.Name, strings.Join(lines[max(0, len(lines)-40):], "\n"))
			}
		}
	}
	env.Down()
	if code == 0 {
		_ = os.RemoveAll(state)
	}
	return code
}

// runNode runs the suite on a real-node cluster that it starts, with rukpak
// installed as the README says, and proves the host is restored after.
func runNode(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, err := startNode(ctx, testenv.RepoRoot())
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e-node:", err)
		return 1
	}
	suite.node, suite.realPods = s, true
	suite.kubeconfig = s.cluster.Kubeconfig
	// Pods reach the suite's registry and git server at the host's address.
	if os.Getenv("E2E_FIXTURE_HOST") == "" {
		_ = os.Setenv("E2E_FIXTURE_HOST", s.cluster.HostIP)
	}
	code := m.Run()
	if code != 0 {
		dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
		s.dumpRukpak(dctx)
		dcancel()
	}
	stopStart := time.Now()
	if err := s.stop(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e-node: teardown:", err)
		return 1
	}
	fmt.Printf("e2e-node: torn down in %s; the host is as it was found\n", time.Since(stopStart).Round(time.Millisecond))
	if code == 0 {
		_ = os.RemoveAll(s.dir)
	} else {
		s.keepLogsOnly()
		fmt.Printf("e2e-node: logs kept in %s\n", s.dir)
	}
	return code
}

// kubectl runs kubectl as the admin; it returns stdout, stderr and the error.
func kubectl(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	return kubectlWithin(t, kubectlDeadline(args), stdin, args...)
}

// kubectlDeadline is how long a kubectl call may run before it is killed:
// two minutes, or a minute past the --timeout it was given (kubectl wait,
// delete), so that a wait ends on its own deadline, with its own message,
// and never on this one.
func kubectlDeadline(args []string) time.Duration {
	deadline := 2 * time.Minute
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--timeout="); ok {
			if d, err := time.ParseDuration(v); err == nil {
				deadline = max(deadline, d+time.Minute)
			}
		}
	}
	return deadline
}

// kubectlWithin runs kubectl, killed after deadline.
func kubectlWithin(t *testing.T, deadline time.Duration, stdin string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+suite.kubeconfig)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// mustKubectl is kubectl failing the test on error.
func mustKubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := kubectl(t, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// patient is the deadline a wait gets: what the test asked for, but never
// less than testenv.WaitTimeout. A wait ends as soon as its condition holds,
// so a long deadline costs time only when a test fails, and no verdict
// depends on how busy the machine is.
func patient(timeout time.Duration) time.Duration {
	return max(timeout, testenv.WaitTimeout)
}

// waitFor runs `kubectl wait` for a condition or jsonpath expression, for
// patient(timeout).
func waitFor(t *testing.T, resource, condition string, timeout time.Duration, extra ...string) {
	t.Helper()
	timeout = patient(timeout)
	args := append([]string{"wait", resource, "--for=" + condition, fmt.Sprintf("--timeout=%s", timeout)}, extra...)
	_, errOut, err := kubectl(t, "", args...)
	if err != nil {
		status, _, _ := kubectl(t, "", "get", resource, "-o", "yaml")
		t.Fatalf("waited %s for %s %s: %v\n%s\n%s", timeout, resource, condition, err, errOut, status)
	}
}

// jsonpath reads a field; resource may carry flags ("deployment/x -n ns").
func jsonpath(t *testing.T, resource, path string) string {
	t.Helper()
	args := append([]string{"get"}, strings.Fields(resource)...)
	return mustKubectl(t, "", append(args, "-o", "jsonpath="+path)...)
}

// eventually polls f until it returns nil or the timeout passes: every
// 250 ms at first, then less often, down to once a second, so that the
// waits of the tests running at the same time (each poll is a kubectl or
// more) leave the CPUs to the cluster they wait on.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	poll(t, timeout, time.Second, what, f)
}

// poll is eventually with the longest pause between polls. It waits
// patient(timeout).
func poll(t *testing.T, timeout, maxPause time.Duration, what string, f func() error) {
	t.Helper()
	timeout = patient(timeout)
	deadline := time.Now().Add(timeout)
	pause := min(250*time.Millisecond, maxPause)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPause)
	}
	t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
}

// indent prefixes every line of s, for embedding PEM in YAML.
func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n"+pad)
}

// contentCA returns the CA that content clients trust: the local
// environment's or E2E_CONTENT_CA, else the ca.crt of the content server's
// self-managed Secret (manifests/base), as an admin would read it.
func contentCA(t *testing.T) []byte {
	t.Helper()
	if suite.local != nil {
		// Read again each time: the local provisioner writes a new CA
		// whenever it starts (TestProvisionerKilledMidInstall restarts it).
		ca, err := os.ReadFile(suite.local.ContentCA)
		if err != nil || len(ca) == 0 {
			t.Fatalf("the local environment wrote no content CA: %v", err)
		}
		return ca
	}
	if len(suite.contentCA) > 0 {
		return suite.contentCA
	}
	out := mustKubectl(t, "", "-n", "rukpak-system", "get", "secret", "rukpak-core-tls", "-o", `jsonpath={.data.ca\.crt}`)
	ca, err := base64.StdEncoding.DecodeString(out)
	if err != nil || len(ca) == 0 {
		t.Fatalf("Secret rukpak-system/rukpak-core-tls has no ca.crt (%v): set E2E_CONTENT_CA", err)
	}
	return ca
}

// contentClient downloads content URLs with the content CA, on the real
// node through nodeDial.
func contentClient(t *testing.T) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(contentCA(t)) {
		t.Fatal("the content CA holds no certificate")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	if suite.node != nil {
		tr.DialContext = nodeDial(t)
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: tr}
}

// nodeDial dials as a pod would on the real node, which runs no cluster DNS:
// a Service's host name (<name>.<namespace>.svc) at its ClusterIP, which the
// node routes, and localhost node ports at the node's address.
func nodeDial(t *testing.T) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		// kind maps localhost:30443 to the node port (overlays/kind);
		// here the node is this host and serves it on its address.
		if host == "localhost" {
			addr = net.JoinHostPort(suite.node.cluster.HostIP, port)
		}
		if parts := strings.Split(host, "."); len(parts) >= 3 && parts[2] == "svc" {
			ip, _, err := kubectl(t, "", "get", "service", parts[0], "-n", parts[1], "-o", "jsonpath={.spec.clusterIP}")
			if err != nil {
				return nil, fmt.Errorf("resolving %s: %w", host, err)
			}
			addr = net.JoinHostPort(ip, port)
		}
		return d.DialContext(ctx, network, addr)
	}
}

// TestKubectlDeadline: a kubectl wait is never killed before its own
// --timeout (it once was, at two minutes, under a ten-minute wait).
func TestKubectlDeadline(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{[]string{"get", "pods"}, 2 * time.Minute},
		{[]string{"wait", "crd/x", "--for=delete", "--timeout=10m0s"}, 11 * time.Minute},
		{[]string{"delete", "bd/x", "--timeout=30s"}, 2 * time.Minute},
		{[]string{"wait", "x", "--timeout=nonsense"}, 2 * time.Minute},
	} {
		if got := kubectlDeadline(tc.args); got != tc.want {
			t.Errorf("kubectlDeadline(%q) = %s, want %s", tc.args, got, tc.want)
		}
	}
}
