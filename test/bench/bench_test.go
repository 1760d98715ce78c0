package bench

// The end-to-end benchmark harness behind `make bench`. It prints figures
// next to their floor or reference and never asserts on a time: it is a
// measurement, not a test. It runs only with RUKPAK_BENCH=1.
//
//	RUKPAK_BENCH=1 go test -run '^TestBench$' -v -timeout 60m ./test/bench/
//
// RUKPAK_BENCH_ONLY=unpack,install,prometheus,helm,many,crds,fleet runs a
// subset;
// RUKPAK_BENCH_OUT=file also writes the table there (markdown);
// RUKPAK_BENCH_REPS=n repeats each unpack measurement n times (default 3);
// RUKPAK_BENCH_PROVISIONER_ARGS adds flags to the provisioner (for example
// --pprof-bind-address=127.0.0.1:6060 to profile it).
//
// Sections (RUKPAK_BENCH_ONLY names):
//   - unpack: unpack/image + storage.LocalDirectory.Store of a
//     1×50 MiB and a 20×5 MiB image of random data from a loopback TLS
//     registry, each run in a fresh child process (this test binary
//     re-executed) so its peak RSS (VmHWM) is its own; the floor is a plain
//     go-containerregistry pull of the compressed layers to files, in a
//     child process too.
//   - install: one API server (envtest: etcd + kube-apiserver);
//     1,000 ConfigMaps created by the bare client-go floor (QPS -1, all in
//     parallel), installed by a BundleDeployment (the built provisioner
//     binary, a separate process), by `helm install` (helm CLI built from
//     the pinned module) and by `kubectl apply --server-side`.
//   - prometheus: prometheus-0.47.0 (registry+v1) pushed as an
//     image and installed by a BundleDeployment; create -> Installed=True.
//   - helm, helm_bench_test.go: kube-state-metrics through the
//     helm class vs `helm install` of the same chart, and a chart of 1,000
//     ConfigMaps through the helm class vs the same ConfigMaps through the
//     plain class, each side three times, alternating.
//   - many, many_bench_test.go: N BundleDeployments of
//     10 ConfigMaps for each N of RUKPAK_BENCH_MANY (default 1000; 10000 opt-in), each size
//     on a fresh API server and provisioner process: time to all Installed,
//     VmHWM, API writes per install by verb and resource, the
//     per-BundleDeployment cost, steady writes, and a restart; beside its
//     floor (floors_bench_test.go), the same writes from a bare client.
//   - crds, crds_bench_test.go: at least 80 MiB of the shared
//     test data's real CRD YAML (RUKPAK_BENCH_CRDS_MIB changes it) across
//     many plain BundleDeployments, on a fresh API server and provisioner
//     process: the provisioner's peak and steady RSS, with heap profiles;
//     beside its floor, the same CRDs applied and waited for Established.
//   - fleet, fleet_bench_test.go: the sixty real operators of the
//     shared test data installed at once on a local kwok cluster, then with
//     ten failing: time, CPU beside the API server's and etcd's, bytes
//     allocated per byte of content, memory and an idle window.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/storage"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/image"
)

const (
	provisionerNS = "rukpak-system"
	prometheusDir = "/work/shared/testdata/registry-v1/prometheus-0.47.0"
	manyObjects   = 10
	bigObjects    = 1000
	steadyWindow  = 60 * time.Second
	steadySettle  = 15 * time.Second
)

// ---------------------------------------------------------------- report

type row struct {
	section, figure, value, reference, ratio, note string
}

type report struct {
	mu   sync.Mutex
	rows []row
}

func (r *report) add(section, figure, value, reference, ratio, note string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows = append(r.rows, row{section, figure, value, reference, ratio, note})
	fmt.Printf("BENCH %s | %s | %s | %s | %s | %s\n", section, figure, value, reference, ratio, note)
}

func (r *report) print(t *testing.T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SECTION\tFIGURE\tVALUE\tFLOOR/REFERENCE\tRATIO\tNOTE")
	for _, x := range r.rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", x.section, x.figure, x.value, x.reference, x.ratio, x.note)
	}
	_ = tw.Flush()
	fmt.Printf("\n%s\n%s", machine(), buf.String())
	if out := os.Getenv("RUKPAK_BENCH_OUT"); out != "" {
		var md strings.Builder
		fmt.Fprintf(&md, "<!-- %s -->\n\n| section | figure | value | floor / reference | ratio | note |\n|---|---|---|---|---|---|\n", machine())
		for _, x := range r.rows {
			fmt.Fprintf(&md, "| %s | %s | %s | %s | %s | %s |\n", x.section, x.figure, x.value, x.reference, x.ratio, x.note)
		}
		if err := os.WriteFile(out, []byte(md.String()), 0o644); err != nil {
			t.Errorf("writing %s: %v", out, err)
		}
	}
}

func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if m := regexp.MustCompile(`(?m)^model name\s*:\s*(.+)$`).FindSubmatch(b); m != nil {
			cpu = string(m[1])
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if m := regexp.MustCompile(`(?m)^MemTotal:\s*(\d+) kB`).FindSubmatch(b); m != nil {
			kb, _ := strconv.ParseFloat(string(m[1]), 64)
			mem = fmt.Sprintf("%.1f GiB", kb/(1<<20))
		}
	}
	load := "unknown"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			load = strings.Join(f[:3], " ")
		}
	}
	return fmt.Sprintf("%s, nproc %d, %s RAM, %s, loadavg %s, %s", cpu, runtime.NumCPU(), mem, runtime.Version(),
		load, time.Now().UTC().Format(time.RFC3339))
}

// floorRuns and bdRuns are how many times each side of the 1,000-object
// comparison runs; medians are compared.
const (
	floorRuns = 5
	bdRuns    = 3
)

func median(ds []time.Duration) time.Duration {
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}

// spread lists the runs in order, in seconds.
func spread(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%.2f", d.Seconds())
	}
	return strings.Join(parts, " / ") + " s"
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
func mib(kib int64) string        { return fmt.Sprintf("%.0f MiB", float64(kib)/1024) }
func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func want(section string) bool {
	only := os.Getenv("RUKPAK_BENCH_ONLY")
	return only == "" || slices.Contains(strings.Split(only, ","), section)
}

// ---------------------------------------------------------------- main

func TestBench(t *testing.T) {
	if os.Getenv("RUKPAK_BENCH") != "1" {
		t.Skip("benchmark harness: run with RUKPAK_BENCH=1 (make bench)")
	}
	// The harness's own clients log nothing worth reading; without a
	// logger controller-runtime prints a stack trace in the table's midst.
	ctrllog.SetLogger(logr.Discard())
	r := &report{}
	defer r.print(t)
	defer removeProvisionerBinary()
	fmt.Printf("machine: %s\n", machine())

	reg := testregistry.New(t)
	if want("unpack") {
		benchUnpackStore(t, r, reg)
	}
	if !want("install") && !want("prometheus") && !want("helm") && !want("many") && !want("crds") && !want("fleet") {
		return
	}
	if want("install") || want("prometheus") || want("helm") {
		c := newCluster(t, reg)
		p := c.startProvisioner(t, "a")
		if want("install") {
			c.benchInstall1000(t, r)
		}
		if want("prometheus") {
			c.benchPrometheus(t, r)
		}
		if want("helm") {
			c.benchHelm(t, r)
		}
		var did []string
		if want("install") {
			did = append(did, "1,000-ConfigMap")
		}
		if want("prometheus") {
			did = append(did, "prometheus")
		}
		if want("helm") {
			did = append(did, "helm")
		}
		r.add("install", "provisioner VmHWM after the "+strings.Join(did, " and ")+" install(s)", mib(p.hwm(t)), "", "", "separate process, both classes")
		// Start the next phase from a clean slate: the next provisioner
		// must not re-reconcile (or cache) what this one installed.
		c.cleanup(t)
		p.stop(t)
	}
	if want("many") {
		benchMany(t, r, reg)
	}
	if want("crds") {
		benchCRDs(t, r, reg)
	}
	if want("fleet") {
		benchFleet(t, r, reg)
	}
}

// ---------------------------------------------------------------- unpack

type childResult struct {
	Seconds, UnpackSeconds, StoreSeconds float64
	BaseRSSKiB, HWMKiB                   int64
}

func benchUnpackStore(t *testing.T, r *report, reg *testregistry.Registry) {
	reps := 3
	if n, err := strconv.Atoi(os.Getenv("RUKPAK_BENCH_REPS")); err == nil && n > 0 {
		reps = n
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, reg.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, shape := range []struct{ layers, size int }{{1, 50 << 20}, {20, 5 << 20}} {
		rng := rand.NewChaCha8([32]byte{byte(shape.layers), 3})
		var layers []v1.Layer
		for i := range shape.layers {
			data := make([]byte, shape.size) // incompressible
			_, _ = rng.Read(data)
			layers = append(layers, testregistry.Layer(t, map[string]string{fmt.Sprintf("manifests/blob-%02d", i): string(data)}))
		}
		label := fmt.Sprintf("%d×%d MiB", shape.layers, shape.size>>20)
		ref := reg.MustPush(t, reg.Ref(fmt.Sprintf("bench:%dx%d", shape.layers, shape.size>>20)), testregistry.Image(t, layers...))
		layers = nil
		runtime.GC()

		var floor, full []childResult
		for range reps {
			floor = append(floor, runChild(t, "pull", ref, caFile))
			full = append(full, runChild(t, "unpack-store", ref, caFile))
		}
		fl, fu := medianBy(floor, func(c childResult) float64 { return c.Seconds }), medianBy(full, func(c childResult) float64 { return c.Seconds })
		up := medianBy(full, func(c childResult) float64 { return c.UnpackSeconds })
		st := medianBy(full, func(c childResult) float64 { return c.StoreSeconds })
		note := fmt.Sprintf("median of %d fresh processes; of which unpack %.2f s, store %.2f s", reps, up.UnpackSeconds, st.StoreSeconds)
		r.add("unpack", label+" unpack+store time", fmt.Sprintf("%.2f s", fu.Seconds), fmt.Sprintf("pull-to-disk %.2f s", fl.Seconds), ratio(fu.Seconds, fl.Seconds), note)
		hwm := func(cs []childResult) (int64, int64) {
			var peak, base int64
			for _, c := range cs {
				if c.HWMKiB-c.BaseRSSKiB > peak-base {
					peak, base = c.HWMKiB, c.BaseRSSKiB
				}
			}
			return peak, base
		}
		p, b := hwm(full)
		fp, fb := hwm(floor)
		r.add("unpack", label+" unpack+store peak RSS (VmHWM)", fmt.Sprintf("%s (+%s over start)", mib(p), mib(p-b)),
			fmt.Sprintf("pull-to-disk %s (+%s)", mib(fp), mib(fp-fb)), ratio(float64(p-b), float64(fp-fb)), "growth ratio; worst of the runs")
	}
}

func medianBy(cs []childResult, key func(childResult) float64) childResult {
	s := slices.Clone(cs)
	sort.Slice(s, func(i, j int) bool { return key(s[i]) < key(s[j]) })
	return s[len(s)/2]
}

func runChild(t *testing.T, op, ref, caFile string) childResult {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchChild$", "-test.v")
	cmd.Env = append(os.Environ(), "RUKPAK_BENCH_CHILD="+op, "RUKPAK_BENCH_CHILD_REF="+ref,
		"RUKPAK_BENCH_CHILD_CA="+caFile, "RUKPAK_BENCH_CHILD_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child %s: %v\n%s", op, err, out)
	}
	m := regexp.MustCompile(`BENCHRESULT (\{.*\})`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("child %s printed no result:\n%s", op, out)
	}
	var res childResult
	if err := json.Unmarshal(m[1], &res); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestBenchChild is one measured operation in a process of its own, so that
// VmHWM is this operation's peak (plus the test binary's baseline, reported
// separately).
func TestBenchChild(t *testing.T) {
	op := os.Getenv("RUKPAK_BENCH_CHILD")
	if op == "" {
		t.Skip("child process of TestBench")
	}
	ref, dir := os.Getenv("RUKPAK_BENCH_CHILD_REF"), os.Getenv("RUKPAK_BENCH_CHILD_DIR")
	caPEM, err := os.ReadFile(os.Getenv("RUKPAK_BENCH_CHILD_CA"))
	if err != nil {
		t.Fatal(err)
	}
	// Once-per-process work is done before the clock starts, for both
	// sides: a provisioner loads the system roots once in its life (~8 ms
	// here), not per image.
	if _, err := x509.SystemCertPool(); err != nil {
		t.Logf("no system roots: %v", err)
	}
	runtime.GC()
	res := childResult{BaseRSSKiB: procStatus(t, os.Getpid(), "VmRSS")}
	ctx := context.Background()
	start := time.Now()
	switch op {
	case "pull":
		if err := pullToDisk(ref, caPEM, dir); err != nil {
			t.Fatal(err)
		}
	case "unpack-store":
		u := image.New(unpack.Config{BaseDir: filepath.Join(dir, "unpack"), Limits: unpack.Limits{MaxBytes: 1 << 30}})
		b := &rukpakv1alpha1.Bundle{
			ObjectMeta: metav1.ObjectMeta{Name: "bench"},
			Spec: rukpakv1alpha1.BundleSpec{
				ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
				Source: rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage,
					Image: &rukpakv1alpha1.ImageSource{Ref: ref, CertificateData: string(caPEM)}},
			},
		}
		got, err := u.Unpack(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		res.UnpackSeconds = time.Since(start).Seconds()
		s0 := time.Now()
		store := &storage.LocalDirectory{RootDirectory: filepath.Join(dir, "store"), BaseURL: "https://content.bench"}
		if err := store.Store(ctx, b, got.FS); err != nil {
			t.Fatal(err)
		}
		res.StoreSeconds = time.Since(s0).Seconds()
		_ = got.Close()
	default:
		t.Fatalf("unknown op %q", op)
	}
	res.Seconds = time.Since(start).Seconds()
	res.HWMKiB = procStatus(t, os.Getpid(), "VmHWM")
	b, _ := json.Marshal(res)
	fmt.Printf("BENCHRESULT %s\n", b)
}

// pullToDisk writes each layer's compressed blob to a file with
// go-containerregistry: the least any puller has to do.
func pullToDisk(ref string, caPEM []byte, dir string) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	img, err := remote.Image(r, remote.WithTransport(tr))
	if err != nil {
		return err
	}
	return testregistry.PullLayers(img, dir)
}

// procStatus reads a "kB" field (VmRSS, VmHWM) of /proc/<pid>/status.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + field + `:\s*(\d+) kB`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no %s in /proc/%d/status", field, pid)
	}
	v, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return v
}

// ---------------------------------------------------------------- cluster

type cluster struct {
	env        *testenv.Env
	cfg        *rest.Config // unthrottled
	c          client.Client
	cs         *kubernetes.Clientset
	reg        *testregistry.Registry
	dir        string
	kubeconfig string
	assets     string
	provBin    string
}

func newCluster(t *testing.T, reg *testregistry.Registry) *cluster {
	env := testenv.Start(t)
	c := &cluster{env: env, reg: reg, dir: t.TempDir(), assets: testenv.AssetsDir(t)}
	c.cfg = rest.CopyConfig(env.Config)
	c.cfg.QPS, c.cfg.Burst = -1, 0
	var err error
	if c.c, err = client.New(c.cfg, client.Options{Scheme: env.Env.Scheme}); err != nil {
		t.Fatal(err)
	}
	if c.cs, err = kubernetes.NewForConfig(c.cfg); err != nil {
		t.Fatal(err)
	}
	user, err := env.Env.AddUser(envtest.User{Name: "bench-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	c.kubeconfig = filepath.Join(c.dir, "kubeconfig")
	if err := os.WriteFile(c.kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{provisionerNS, "bench-helm", "bench-kubectl", "bench-many"} {
		if err := c.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	c.provBin = provisionerBinary(t)
	return c
}

// builtProvisioner is the provisioner binary, built once per run however
// many clusters use it.
var builtProvisioner struct {
	sync.Mutex
	dir, path string
}

// provisionerBinary builds cmd/provisioner as make build does (stripped), so
// its resident set is the shipped binary's; removeProvisionerBinary deletes
// it at the end of the run.
func provisionerBinary(t *testing.T) string {
	t.Helper()
	builtProvisioner.Lock()
	defer builtProvisioner.Unlock()
	if builtProvisioner.path == "" {
		dir, err := os.MkdirTemp("", "rukpak-bench-bin-")
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "provisioner")
		// As make build does, and the image holds: static, stripped.
		goBuild(t, testenv.RepoRoot(), []string{"CGO_ENABLED=0"}, "-trimpath", "-ldflags=-s -w", "-o", p, "./cmd/provisioner")
		builtProvisioner.dir, builtProvisioner.path = dir, p
	}
	return builtProvisioner.path
}

func removeProvisionerBinary() {
	builtProvisioner.Lock()
	defer builtProvisioner.Unlock()
	if builtProvisioner.dir != "" {
		_ = os.RemoveAll(builtProvisioner.dir)
		builtProvisioner.dir, builtProvisioner.path = "", ""
	}
}

func goBuild(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"build"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %v: %v\n%s", args, err, out)
	}
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// startProvisioner runs the built provisioner binary (every class) against
// the API server, as a separate process; extra flags come after the
// defaults, so they override them.
func (c *cluster) startProvisioner(t *testing.T, id string, extra ...string) *proc {
	t.Helper()
	d := filepath.Join(c.dir, "prov-"+id)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(d, "log")
	if dir := os.Getenv("RUKPAK_BENCH_LOGDIR"); dir != "" {
		// Kept after the run, e.g. with GODEBUG=gctrace=1 for GC figures.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		logPath = filepath.Join(dir, "provisioner-"+id+".log")
	}
	// A restart (the same id: the same storage, as a container restart
	// keeps its emptyDir) logs next to the first run.
	for i, first := 2, logPath; ; i++ {
		if _, err := os.Stat(logPath); err != nil {
			break
		}
		logPath = fmt.Sprintf("%s.%d", first, i)
	}
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(c.provBin,
		"--namespace="+provisionerNS,
		"--storage-dir="+filepath.Join(d, "storage"),
		"--unpack-dir="+filepath.Join(d, "unpack"),
		"--content-bind-address=127.0.0.1:0",
		"--content-url=https://127.0.0.1:8443",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
	)
	cmd.Args = append(cmd.Args, extra...)
	// For profiling, e.g. RUKPAK_BENCH_PROVISIONER_ARGS=--pprof-bind-address=127.0.0.1:6060.
	cmd.Args = append(cmd.Args, strings.Fields(os.Getenv("RUKPAK_BENCH_PROVISIONER_ARGS"))...)
	cmd.Env = append(withoutEnv(os.Environ(), "GOMEMLIMIT"), "KUBECONFIG="+c.kubeconfig, provisionerMemEnv(t, c.provBin))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), log: logf.Name()}
	go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
	t.Cleanup(func() { p.stop(t) })
	return p
}

func (p *proc) hwm(t *testing.T) int64 {
	select {
	case <-p.done:
		t.Fatalf("provisioner exited early; log %s", p.log)
	default:
	}
	return procStatus(t, p.cmd.Process.Pid, "VmHWM")
}

func (p *proc) stop(t *testing.T) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func cmYAML(ns, name string, i int) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  index: %q\n  value: %q\n",
		name, ns, strconv.Itoa(i), strings.Repeat(fmt.Sprintf("%04d", i), 32))
}

func configMap(ns, name string, i int) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Data: map[string]string{"index": strconv.Itoa(i), "value": strings.Repeat(fmt.Sprintf("%04d", i), 32)}}
}

func (c *cluster) imageSource(t *testing.T, tag string, layer v1.Layer) rukpakv1alpha1.BundleSource {
	ref := c.reg.MustPush(t, c.reg.Ref(tag), testregistry.Image(t, layer))
	return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage,
		Image: &rukpakv1alpha1.ImageSource{Ref: ref, CertificateData: string(c.reg.CAPEM)}}
}

func newBD(name, bundleClass string, src rukpakv1alpha1.BundleSource) *rukpakv1alpha1.BundleDeployment {
	return &rukpakv1alpha1.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: rukpakv1alpha1.BundleDeploymentSpec{
			ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
			Template: rukpakv1alpha1.BundleTemplate{
				Metadata: rukpakv1alpha1.TemplateMetadata{Labels: map[string]string{"app": name}},
				Spec:     rukpakv1alpha1.BundleSpec{ProvisionerClassName: bundleClass, Source: src},
			},
		},
	}
}

func installed(bd *rukpakv1alpha1.BundleDeployment) (bool, string) {
	c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled)
	if c == nil {
		return false, "no Installed condition"
	}
	return c.Status == metav1.ConditionTrue, c.Reason + ": " + c.Message
}

// timeToInstalled creates bd and watches it until Installed=True: the end
// is when the provisioner's status write is seen, as `helm install`'s is
// when the process exits (polling added up to its interval). It also notes
// when the generated Bundle was first seen Unpacked.
func (c *cluster) timeToInstalled(t *testing.T, bd *rukpakv1alpha1.BundleDeployment, timeout time.Duration) (total, unpacked time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	wc, err := client.NewWithWatch(c.cfg, client.Options{Scheme: c.env.Env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	bdw, err := wc.Watch(ctx, &rukpakv1alpha1.BundleDeploymentList{}, client.MatchingFields{"metadata.name": bd.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer bdw.Stop()
	bw, err := wc.Watch(ctx, &rukpakv1alpha1.BundleList{}, client.MatchingLabels{rukpakv1alpha1.LabelOwnerName: bd.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer bw.Stop()
	start := time.Now()
	if err := wc.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}
	last, bundles := "", bw.ResultChan()
	for {
		select {
		case ev, ok := <-bundles:
			if !ok {
				bundles = nil // the Unpacked time stays unknown
				continue
			}
			if b, isBundle := ev.Object.(*rukpakv1alpha1.Bundle); isBundle && unpacked == 0 && b.Status.Phase == rukpakv1alpha1.PhaseUnpacked {
				unpacked = time.Since(start)
			}
		case ev, ok := <-bdw.ResultChan():
			if !ok {
				t.Fatalf("bundle deployment %s not Installed after %s (watch ended): %s", bd.Name, time.Since(start).Round(time.Second), last)
			}
			got, isBD := ev.Object.(*rukpakv1alpha1.BundleDeployment)
			if !isBD {
				continue
			}
			done, msg := installed(got)
			if done {
				return time.Since(start), unpacked
			}
			last = msg
		}
	}
}

func (c *cluster) countCMs(t *testing.T, ns string) int {
	var l corev1.ConfigMapList
	if err := c.c.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, cm := range l.Items {
		if strings.HasPrefix(cm.Name, "cm-") {
			n++
		}
	}
	return n
}

// ---------------------------------------------------------------- install

func (c *cluster) benchInstall1000(t *testing.T, r *report) {
	ctx := context.Background()
	names := make([]string, bigObjects)
	for i := range names {
		names[i] = fmt.Sprintf("cm-%04d", i)
	}

	// The floor: 1,000 creates in parallel, no client-side throttling. It
	// is cheap, so it runs five times (fresh namespaces) and the median is
	// the reference; the spread shows how noisy the machine is.
	var floors []time.Duration
	for k := range floorRuns {
		ns := fmt.Sprintf("bench-floor-%d", k)
		if err := c.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		var failed atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for i, n := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, n, i), metav1.CreateOptions{}); err != nil {
					failed.Add(1)
				}
			}()
		}
		wg.Wait()
		floors = append(floors, time.Since(start))
		if failed.Load() > 0 || c.countCMs(t, ns) != bigObjects {
			t.Fatalf("floor: %d creates failed", failed.Load())
		}
	}
	floor := median(floors)
	r.add("install", "1,000 ConfigMaps: bare client-go, parallel, QPS -1 (floor)", secs(floor), "", "1.00×",
		fmt.Sprintf("median of %d (%s)", floorRuns, spread(floors)))

	// BundleDeployment: three of them, each with its own image and
	// namespace, one after the other; the median is compared.
	var totals []time.Duration
	var notes []string
	for k := range bdRuns {
		ns := fmt.Sprintf("bench-bd-%d", k)
		if err := c.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		files := map[string]string{}
		for i, n := range names {
			files["manifests/"+n+".yaml"] = cmYAML(ns, n, i)
		}
		src := c.imageSource(t, fmt.Sprintf("bench-1000:v%d", k), testregistry.Layer(t, files))
		req0 := c.requests(t, false)
		total, unpacked := c.timeToInstalled(t, newBD(fmt.Sprintf("bench-1000-%d", k), rukpakv1alpha1.ProvisionerClassPlain, src), 10*time.Minute)
		bdReqs := c.requests(t, false).sub(req0)
		if n := c.countCMs(t, ns); n != bigObjects {
			t.Fatalf("BundleDeployment installed %d ConfigMaps", n)
		}
		totals = append(totals, total)
		notes = append(notes, fmt.Sprintf("Unpacked at %.2f s, configmaps requests %s", unpacked.Seconds(), bdReqs.of("configmaps")))
	}
	total := median(totals)
	r.add("install", "1,000 ConfigMaps: BundleDeployment create -> Installed=True", secs(total), "floor "+secs(floor), ratio(total.Seconds(), floor.Seconds()),
		fmt.Sprintf("median of %d (%s); target ≤ 3× floor; first run: %s", bdRuns, spread(totals), notes[0]))

	// helm install of the same objects as a chart.
	helm := c.helm(t)
	chart := filepath.Join(c.dir, "chart")
	writeFiles(t, chart, map[string]string{"Chart.yaml": "apiVersion: v2\nname: bench\nversion: 0.1.0\n"})
	tf := map[string]string{}
	for i, n := range names {
		tf["templates/"+n+".yaml"] = cmYAML("bench-helm", n, i)
	}
	writeFiles(t, chart, tf)
	req0 := c.requests(t, false)
	hd := c.runTimed(t, helm, "install", "bench-1000", chart, "--namespace", "bench-helm", "--kubeconfig", c.kubeconfig)
	helmReqs := c.requests(t, false).sub(req0)
	if n := c.countCMs(t, "bench-helm"); n != bigObjects {
		t.Fatalf("helm installed %d ConfigMaps", n)
	}
	r.add("install", "1,000 ConfigMaps: helm install (CLI from the pinned module)", secs(hd), "floor "+secs(floor), ratio(hd.Seconds(), floor.Seconds()),
		fmt.Sprintf("BundleDeployment / helm = %s; configmaps requests: %s", ratio(total.Seconds(), hd.Seconds()), helmReqs.of("configmaps")))

	// kubectl apply --server-side of the same files.
	kdir := filepath.Join(c.dir, "kubectl")
	kf := map[string]string{}
	for i, n := range names {
		kf[n+".yaml"] = cmYAML("bench-kubectl", n, i)
	}
	writeFiles(t, kdir, kf)
	kd := c.runTimed(t, filepath.Join(c.assets, "kubectl"), "--kubeconfig", c.kubeconfig, "apply", "--server-side", "-f", kdir)
	if n := c.countCMs(t, "bench-kubectl"); n != bigObjects {
		t.Fatalf("kubectl applied %d ConfigMaps", n)
	}
	r.add("install", "1,000 ConfigMaps: kubectl apply --server-side -f DIR", secs(kd), "floor "+secs(floor), ratio(kd.Seconds(), floor.Seconds()),
		"kubectl from the control-plane assets (same version as the API server)")
}

// helm is the helm CLI of the helm.sh/helm/v3 version this module pins
// (hack/testbin.sh helm, built by make test-deps), or RUKPAK_BENCH_HELM.
func (c *cluster) helm(t *testing.T) string {
	if h := os.Getenv("RUKPAK_BENCH_HELM"); h != "" {
		return h
	}
	return filepath.Join(testenv.MustTestbin(t, "helm"), "helm")
}

func (c *cluster) runTimed(t *testing.T, bin string, args ...string) time.Duration {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig, "HELM_CACHE_HOME="+filepath.Join(c.dir, "helmcache"),
		"HELM_CONFIG_HOME="+filepath.Join(c.dir, "helmconfig"), "HELM_DATA_HOME="+filepath.Join(c.dir, "helmdata"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", filepath.Base(bin), args, err, out.String())
	}
	return time.Since(start)
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for n, body := range files {
		p := filepath.Join(root, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// ---------------------------------------------------------------- prometheus

func (c *cluster) benchPrometheus(t *testing.T, r *report) {
	if _, err := os.Stat(prometheusDir); err != nil {
		r.add("prometheus", "prometheus-0.47.0 create -> Installed=True", "skipped", "", "", err.Error())
		return
	}
	src := c.imageSource(t, "prometheus:0.47.0", testregistry.LayerFromDir(t, prometheusDir, ""))
	total, unpacked := c.timeToInstalled(t, newBD("prometheus", rukpakv1alpha1.ProvisionerClassRegistry, src), 5*time.Minute)
	r.add("prometheus", "prometheus-0.47.0 (registry+v1) BundleDeployment create -> Installed=True", secs(total), "", "",
		fmt.Sprintf("registry Bundle Unpacked (pull+convert+store) seen at %.2f s", unpacked.Seconds()))
}

// cleanup deletes what the first provisioner installed (it uninstalls
// through its finalizer) and what the helm, kubectl and floor runs created,
// so the next provisioner process starts with an empty informer cache.
func (c *cluster) cleanup(t *testing.T) {
	ctx := context.Background()
	if err := c.c.DeleteAllOf(ctx, &rukpakv1alpha1.BundleDeployment{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var l rukpakv1alpha1.BundleDeploymentList
		if err := c.c.List(ctx, &l); err != nil {
			t.Fatal(err)
		}
		if len(l.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bundle deployments still there after delete", len(l.Items))
		}
		time.Sleep(200 * time.Millisecond)
	}
	var namespaces []string
	for k := range floorRuns {
		namespaces = append(namespaces, fmt.Sprintf("bench-floor-%d", k))
	}
	for k := range bdRuns {
		namespaces = append(namespaces, fmt.Sprintf("bench-bd-%d", k))
	}
	for _, ns := range append(namespaces, "bench-helm", "bench-kubectl") {
		if err := c.c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if err := c.c.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
}

type writeKey struct{ verb, resource string }
type writeCounts map[writeKey]float64

func (w writeCounts) sub(o writeCounts) writeCounts {
	out := writeCounts{}
	for k, v := range w {
		out[k] = v - o[k]
	}
	return out
}

// of summarises the requests on one resource, e.g. "GET=1000 POST=1000".
func (w writeCounts) of(resource string) string {
	var parts []string
	for k, v := range w {
		if k.resource == resource && v > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k.verb, int64(v)))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

var labelRe = regexp.MustCompile(`(\w+)="([^"]*)"`)

// writes reads the API server's apiserver_request_total for mutating verbs,
// by verb and resource (subresources included, e.g. bundles/status).
func (c *cluster) writes(t *testing.T) writeCounts { return c.requests(t, true) }

// requests reads apiserver_request_total by verb and resource, for every
// verb or (mutating) only the writes.
func (c *cluster) requests(t *testing.T, mutating bool) writeCounts {
	all, err := testenv.ServerRequests(context.Background(), c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := writeCounts{}
	for k, v := range all {
		if !mutating || mutatingVerb(k.Verb) {
			out[writeKey{k.Verb, k.Resource}] += v
		}
	}
	return out
}

func mutatingVerb(verb string) bool {
	switch verb {
	case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "CREATE", "UPDATE", "APPLY":
		return true
	}
	return false
}
