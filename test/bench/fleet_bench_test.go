package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/devenv"
	"github.com/rukpak-dev/rukpak/internal/localcluster"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testnet"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/provisioner/metrics"
	"github.com/rukpak-dev/rukpak/provisioner/registry"
)

// ---------------------------------------------------------------- fleet

// The fleet scenario: the sixty real operators of the shared test data
// (fleet/, one registry+v1 bundle each), every bundle pushed as an image and
// installed at once by its own BundleDeployment (plain class, its Bundle of
// the registry class), against the provisioner as a separate process, on a
// local cluster (internal/localcluster: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and a kwok node, sized as make run
// is), so the operators' Deployments really become Available and Healthy is
// reached. Twice, each on a fresh cluster and provisioner process: all
// installable, then with ten of them made to fail (each given a
// ServiceMonitor, whose CRD nothing serves), which shows what failing
// installs cost while they back off. Per round it prints:
//   - create -> all Installed and all Healthy (for the failing round: the
//     others Installed and Healthy, the failing ones reported failed);
//   - CPU seconds over the install of the provisioner, kube-apiserver and
//     etcd (/proc/<pid>/stat);
//   - bytes the provisioner allocated (its go_memstats_alloc_bytes_total)
//     per byte of rendered content (the JSON of every object the registry
//     class renders from the bundles, as they are applied);
//   - the largest heap in use sampled during the install and the live heap
//     after a forced collection at the end; peak RSS (VmHWM);
//   - an idle window (RUKPAK_BENCH_FLEET_IDLE, default 5m) once the round
//     has settled, nothing changing: the provisioner's CPU (cores), MB/s
//     allocated, reconciles and API requests per minute, and its steady RSS
//     (median of VmRSS sampled through the window).
//
// RUKPAK_BENCH_FLEET_DIR is the fleet directory (default
// ../shared/testdata/fleet); RUKPAK_BENCH_FLEET_N installs only its first n
// bundles (a smoke run of the harness; its figures are not the scenario's).

const (
	// fleetFailing is how many operators the second round makes fail.
	fleetFailing = 10
	// fleetSettle is how long a round is left alone after it is done
	// before its idle window starts: the last status writes and health
	// checks are not idleness.
	fleetSettle = 30 * time.Second
	// fleetSample is how often RSS is sampled (from /proc: free for the
	// provisioner).
	fleetSample = 2 * time.Second
	// fleetHeapSample is how often the heap in use is read from /metrics
	// while installing. A scrape costs the provisioner about half a
	// megabyte of allocation, counted in the figure like the rest: every
	// 10 s, as a Prometheus scraping often would, not every 2 s.
	fleetHeapSample = 10 * time.Second
)

// fleetDir finds the fleet's bundles.
func fleetDir(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("RUKPAK_BENCH_FLEET_DIR"), testenv.SharedTestdata("fleet")}
	for _, d := range candidates {
		if d == "" {
			continue
		}
		if _, err := os.Stat(d); err == nil {
			return d
		}
	}
	t.Fatalf("no fleet directory (set RUKPAK_BENCH_FLEET_DIR); looked at %v", candidates[1:])
	return ""
}

func fleetIdle(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("RUKPAK_BENCH_FLEET_IDLE")
	if v == "" {
		return 5 * time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 10*time.Second {
		t.Fatalf("RUKPAK_BENCH_FLEET_IDLE=%q: want a duration of at least 10s", v)
	}
	return d
}

// fleetBundle is a bundle of the fleet, pushed.
type fleetBundle struct {
	devenv.FleetBundle
	src     rukpakv1alpha1.BundleSource // as it is
	failing rukpakv1alpha1.BundleSource // with a ServiceMonitor added
}

// serviceMonitor is an object of a kind no CRD of the cluster serves: its
// install fails until one does.
const serviceMonitor = `apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: bench-fleet-unserved
spec:
  selector:
    matchLabels:
      app: bench-fleet
  endpoints:
  - port: metrics
`

func benchFleet(t *testing.T, r *report, reg *testregistry.Registry) {
	dir := fleetDir(t)
	idle := fleetIdle(t)
	all, err := devenv.FleetBundles(dir)
	if err != nil {
		t.Fatal(err)
	}
	smoke := ""
	if v := os.Getenv("RUKPAK_BENCH_FLEET_N"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > len(all) {
			t.Fatalf("RUKPAK_BENCH_FLEET_N=%q: want 1..%d", v, len(all))
		}
		all = all[:n]
		smoke = fmt.Sprintf("; SMOKE RUN: %d of the fleet's operators (RUKPAK_BENCH_FLEET_N), not the scenario's figures", n)
	}

	// The rendered content: every object the registry class renders from
	// the bundles in their default install mode, as JSON (apply bodies).
	// Rendering them once, here, is the floor of what installing them
	// allocates: the bundles' YAML parsed once, converted once.
	var content, renderAlloc int64
	var objects int
	for _, b := range all {
		before := totalAlloc()
		objs, err := registry.Render(os.DirFS(b.Dir), registry.Options{})
		renderAlloc += int64(totalAlloc() - before)
		if err != nil {
			t.Fatalf("rendering %s: %v", b.Dir, err)
		}
		for _, o := range objs {
			data, err := json.Marshal(o.Object)
			if err != nil {
				t.Fatal(err)
			}
			content += int64(len(data))
		}
		objects += len(objs)
	}

	bundles := make([]fleetBundle, len(all))
	failDir := t.TempDir()
	for i, b := range all {
		bundles[i].FleetBundle = b
		bundles[i].src = pushFleetBundle(t, reg, "fleet/"+b.Name+":"+b.Version, b.Dir)
		// The same bundle with one more object, of a kind nothing serves.
		d := filepath.Join(failDir, filepath.Base(b.Dir))
		if err := os.CopyFS(d, os.DirFS(b.Dir)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "manifests", "bench-fleet-unserved.servicemonitor.yaml"), []byte(serviceMonitor), 0o644); err != nil {
			t.Fatal(err)
		}
		bundles[i].failing = pushFleetBundle(t, reg, "fleet-failing/"+b.Name+":"+b.Version, d)
	}
	shape := fmt.Sprintf("%d operators, %d objects, %.1f MiB rendered (JSON)%s", len(bundles), objects, float64(content)/(1<<20), smoke)
	fmt.Printf("fleet: %s; idle window %s\n", shape, idle)
	floor := float64(renderAlloc) / float64(content)
	r.add("fleet", "floor: bytes allocated per byte of content by one render of every bundle", fmt.Sprintf("%.1f", floor), "", "1.00×",
		fmt.Sprintf("registry.Render of each bundle's files, once, in the bench's process (%.0f MiB): parsing the bundles' YAML and converting it, which any install of them does at least once", float64(renderAlloc)/(1<<20)))

	failing := min(fleetFailing, len(bundles)/3)
	t.Run("all", func(t *testing.T) { benchFleetRound(t, r, reg, bundles, 0, content, floor, idle, shape) })
	if failing > 0 {
		t.Run("failing", func(t *testing.T) { benchFleetRound(t, r, reg, bundles, failing, content, floor, idle, shape) })
	}
}

// totalAlloc is the bytes this process has allocated so far.
func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

func pushFleetBundle(t *testing.T, reg *testregistry.Registry, tag, dir string) rukpakv1alpha1.BundleSource {
	t.Helper()
	ref := reg.MustPush(t, reg.Ref(tag), testregistry.Image(t, testregistry.LayerFromDir(t, dir, "")))
	return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage,
		Image: &rukpakv1alpha1.ImageSource{Ref: ref, CertificateData: string(reg.CAPEM)}}
}

// benchFleetRound installs the fleet on a fresh local cluster, the first
// failing bundles with the unserved ServiceMonitor, and measures.
func benchFleetRound(t *testing.T, r *report, reg *testregistry.Registry, bundles []fleetBundle, failing int, content int64, floor float64, idle time.Duration, shape string) {
	ctx := context.Background()
	c, lc := newLocalCluster(t, reg)
	plain := make([]devenv.FleetBundle, len(bundles))
	for i := range bundles {
		plain[i] = bundles[i].FleetBundle
	}
	pcs, err := devenv.RuntimePriorityClasses(plain)
	if err == nil {
		err = devenv.EnsurePriorityClasses(ctx, c.c, pcs)
	}
	if err != nil {
		t.Fatal(err)
	}
	label := fmt.Sprintf("fleet of %d", len(bundles))
	if failing > 0 {
		label += fmt.Sprintf(", %d failing", failing)
	}
	pprofAddr := testnet.FreeAddr(t)
	pm := c.startMetered(t, "fleet", "--pprof-bind-address="+pprofAddr)
	time.Sleep(3 * time.Second) // its informers start: not part of the figures
	pid := pm.proc.cmd.Process.Pid
	apiserver, etcd := lc.pid(t, "kube-apiserver"), lc.pid(t, "etcd")
	base := procStatus(t, pid, "VmRSS")

	// Heap and RSS sampled while installing.
	var (
		sampled  sync.WaitGroup
		peakHeap uint64
	)
	stopSampling := make(chan struct{})
	sampled.Go(func() {
		tick := time.NewTicker(fleetHeapSample)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
			// From /metrics, which the harness reads anyway: the heap
			// profile's text costs the provisioner megabytes per read,
			// which would be counted in the allocation figure.
			if text, err := pm.fetch(); err == nil {
				peakHeap = max(peakHeap, uint64(parseSamples(string(text)).sum("go_memstats_heap_alloc_bytes", "", "")))
			}
		}
	})

	// The profile at the start, so that the one at the end can be read
	// as the window's alone (pprof -base). ?gc=1 makes both complete: a
	// heap profile otherwise stops at the last collection.
	name := "fleet"
	if failing > 0 {
		name += "-failing"
	}
	profiles := profileDir(t)
	if prof, err := fetch("http://" + pprofAddr + "/debug/pprof/heap?gc=1"); err == nil {
		writeProfile(t, filepath.Join(profiles, name+"-start.heap"), prof)
	}
	req0 := c.requests(t, false)
	s0 := pm.scrape(t)
	cpu0 := [3]float64{cpuSeconds(t, pid), cpuSeconds(t, apiserver), cpuSeconds(t, etcd)}
	start := time.Now()
	var wg sync.WaitGroup
	for i, b := range bundles {
		src := b.src
		if i < failing {
			src = b.failing
		}
		wg.Go(func() {
			if err := c.c.Create(ctx, devenv.FleetBundleDeployment(b.FleetBundle, src)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	isFailing := func(name string) bool {
		return slices.IndexFunc(bundles[:failing], func(b fleetBundle) bool { return b.Name == name }) >= 0
	}
	timeout := 30*time.Minute + time.Duration(len(bundles))*10*time.Second
	installed, healthy := c.waitFleet(t, len(bundles), isFailing, start, timeout)
	cpu1 := [3]float64{cpuSeconds(t, pid), cpuSeconds(t, apiserver), cpuSeconds(t, etcd)}
	s1 := pm.scrape(t)
	logRequests(t, label, c.requests(t, false).sub(req0))
	close(stopSampling)
	sampled.Wait()
	hwm := pm.proc.hwm(t)

	// Where the bytes went, for pprof -sample_index=alloc_space -base
	// (read after the figure: a profile costs the process allocations too).
	if prof, err := fetch("http://" + pprofAddr + "/debug/pprof/heap?gc=1"); err == nil {
		writeProfile(t, filepath.Join(profiles, name+"-install.allocs"), prof)
	}
	bdCtl, bCtl := "bundledeployment-"+rukpakv1alpha1.ProvisionerClassPlain, "bundle-"+rukpakv1alpha1.ProvisionerClassRegistry
	alloc := s1.sum("go_memstats_alloc_bytes_total", "", "") - s0.sum("go_memstats_alloc_bytes_total", "", "")
	done := "all Installed / all Healthy"
	if failing > 0 {
		done = fmt.Sprintf("the %d others Installed / Healthy, the %d failing reported", len(bundles)-failing, failing)
	}
	r.add("fleet", label+": create -> "+done, secs(installed)+" / "+secs(healthy), "", "", shape)
	// Which of the steps an unchanged reconcile skips were run, per
	// BundleDeployment: what the figures below are made of.
	var steps []string
	for _, step := range []string{metrics.StepLoad, metrics.StepDecode, metrics.StepCached, metrics.StepRender, metrics.StepHistory, metrics.StepPreflight} {
		n := s1.sum(metrics.NameReconcileSteps, "step", step) - s0.sum(metrics.NameReconcileSteps, "step", step)
		steps = append(steps, fmt.Sprintf("%s %.1f", step, n/float64(len(bundles))))
	}
	r.add("fleet", label+": CPU seconds until done: provisioner / kube-apiserver / etcd",
		fmt.Sprintf("%.1f / %.1f / %.1f", cpu1[0]-cpu0[0], cpu1[1]-cpu0[1], cpu1[2]-cpu0[2]), "", "",
		fmt.Sprintf("provisioner %s of the API server's; reconciles per BundleDeployment %.1f (per Bundle %.1f); steps per BundleDeployment: %s", ratio(cpu1[0]-cpu0[0], cpu1[1]-cpu0[1]),
			(s1.sum("controller_runtime_reconcile_total", "controller", bdCtl)-s0.sum("controller_runtime_reconcile_total", "controller", bdCtl))/float64(len(bundles)),
			(s1.sum("controller_runtime_reconcile_total", "controller", bCtl)-s0.sum("controller_runtime_reconcile_total", "controller", bCtl))/float64(len(bundles)),
			strings.Join(steps, ", ")))
	r.add("fleet", label+": bytes allocated per byte of content", fmt.Sprintf("%.1f", alloc/float64(content)), "target ≤ 20", ratio(alloc/float64(content), 20),
		fmt.Sprintf("%.0f MiB allocated (go_memstats_alloc_bytes_total) from the first create until done, over %.1f MiB rendered; %s the floor", alloc/(1<<20), float64(content)/(1<<20), ratio(alloc/float64(content), floor)))
	r.add("fleet", label+": provisioner peak RSS (VmHWM)", mib(hwm), "target ≤ 256 MiB", ratio(float64(hwm), 256<<10),
		fmt.Sprintf("%s after start-up; largest heap in use sampled every %s (HeapAlloc, garbage included) %s", mib(base), fleetHeapSample, mib(int64(peakHeap>>10))))

	// Idle: nothing changes; the failing ones back off.
	time.Sleep(fleetSettle)
	i0 := pm.scrape(t)
	ic0 := [3]float64{cpuSeconds(t, pid), cpuSeconds(t, apiserver), cpuSeconds(t, etcd)}
	var rss []int64
	w0 := time.Now()
	for time.Since(w0) < idle {
		time.Sleep(fleetSample)
		rss = append(rss, procStatus(t, pid, "VmRSS"))
	}
	window := time.Since(w0)
	ic1 := [3]float64{cpuSeconds(t, pid), cpuSeconds(t, apiserver), cpuSeconds(t, etcd)}
	i1 := pm.scrape(t)
	slices.Sort(rss)
	steady := rss[len(rss)/2]
	perMin := func(name string) float64 {
		return (i1.sum(name, "", "") - i0.sum(name, "", "")) * float64(time.Minute) / float64(window)
	}
	cores := (ic1[0] - ic0[0]) / window.Seconds()
	mbps := (i1.sum("go_memstats_alloc_bytes_total", "", "") - i0.sum("go_memstats_alloc_bytes_total", "", "")) / window.Seconds() / 1e6
	note := fmt.Sprintf("%s window from %s after done; kube-apiserver %.3f cores, etcd %.3f cores; reconciles per minute %.1f, provisioner API requests per minute %.1f",
		window.Round(time.Second), fleetSettle, (ic1[1]-ic0[1])/window.Seconds(), (ic1[2]-ic0[2])/window.Seconds(),
		perMin("controller_runtime_reconcile_total"), perMin("rest_client_requests_total"))
	r.add("fleet", label+": idle provisioner CPU", fmt.Sprintf("%.3f cores", cores), "target ≤ 0.02 cores", ratio(cores, 0.02), note)
	r.add("fleet", label+": idle allocation", fmt.Sprintf("%.2f MB/s", mbps), "target ≤ 1 MB/s", ratio(mbps, 1), "go_memstats_alloc_bytes_total over the idle window")
	// The live heap last: the forced collection would disturb the window.
	text, err := fetch("http://" + pprofAddr + "/debug/pprof/heap?debug=1&gc=1")
	if err != nil {
		t.Fatal(err)
	}
	r.add("fleet", label+": provisioner steady RSS", mib(steady), "target ≤ 160 MiB", ratio(float64(steady), 160<<10),
		fmt.Sprintf("median of VmRSS every %s through the idle window; live heap after a forced collection at its end %s",
			fleetSample, mib(int64(memStat(text, "HeapAlloc")>>10))))
}

// waitFleet waits until every BundleDeployment is Installed and Healthy,
// or, for the failing ones, reports Installed=False, and returns the times
// since start at which all were Installed (or failed) and Healthy.
func (c *cluster) waitFleet(t *testing.T, n int, failing func(string) bool, start time.Time, timeout time.Duration) (installed, healthy time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var l rukpakv1alpha1.BundleDeploymentList
		if err := c.c.List(context.Background(), &l, client.MatchingLabels{devenv.FleetLabel: "true"}); err != nil {
			t.Fatal(err)
		}
		var in, ok int
		var waiting []string
		for i := range l.Items {
			bd := &l.Items[i]
			inst := meta.FindStatusCondition(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled)
			if failing(bd.Name) {
				// Failed on the missing kind, not merely not yet
				// installed.
				if inst != nil && inst.Status == metav1.ConditionFalse && inst.Reason == rukpakv1alpha1.ReasonInstallFailed {
					in++
					ok++
				} else {
					waiting = append(waiting, bd.Name+" (to fail)")
				}
				continue
			}
			if inst != nil && inst.Status == metav1.ConditionTrue {
				in++
				if h := meta.FindStatusCondition(bd.Status.Conditions, rukpakv1alpha1.TypeHealthy); h != nil && h.Status == metav1.ConditionTrue {
					ok++
					continue
				}
			}
			st := devenv.StatusOf([]rukpakv1alpha1.BundleDeployment{*bd})
			waiting = append(waiting, strings.Join(st.Waiting, ""))
		}
		if in == n && installed == 0 {
			installed = time.Since(start)
		}
		if ok == n {
			return installed, time.Since(start)
		}
		if time.Now().After(deadline) {
			slices.Sort(waiting)
			t.Fatalf("fleet: %d of %d Installed, %d done after %s; waiting: %s", in, n, ok, timeout, strings.Join(waiting[:min(len(waiting), 5)], "; "))
		}
		time.Sleep(time.Second)
	}
}

// ---------------------------------------------------------------- local cluster

// localCluster is a kwok local cluster of the harness.
type localCluster struct {
	*localcluster.Cluster
	workdir string
}

// newLocalCluster starts a local cluster (as make run's, with the CRDs and
// the provisioner's namespace) and a harness cluster view of it.
func newLocalCluster(t *testing.T, reg *testregistry.Registry) (*cluster, *localCluster) {
	t.Helper()
	assets := testenv.MustTestbin(t, "all")
	// Built before the cluster's deadline starts: a first build on a cold
	// cache takes minutes.
	provBin := provisionerBinary(t)
	workdir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitTimeout)
	defer cancel()
	lc, err := localcluster.Create(ctx, assets, workdir, fmt.Sprintf("rukpak-bench-%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lc.Delete(); err != nil {
			t.Logf("deleting the local cluster: %v", err)
		}
	})
	kubectl := filepath.Join(assets, "kubectl")
	for _, args := range [][]string{
		{"apply", "--server-side", "-k", filepath.Join(testenv.RepoRoot(), "manifests", "base", "crd")},
		{"wait", "--for=condition=Established", "--timeout=5m", "crd", "--all"},
		{"create", "namespace", provisionerNS},
	} {
		cmd := exec.CommandContext(ctx, kubectl, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+lc.Kubeconfig)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out.String())
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", lc.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	c := &cluster{cfg: cfg, reg: reg, dir: t.TempDir(), kubeconfig: lc.Kubeconfig, assets: assets, provBin: provBin}
	if c.c, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()}); err != nil {
		t.Fatal(err)
	}
	if c.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	// The pod capacity the fleet's Deployments are scheduled on.
	var nodes corev1.NodeList
	if err := c.c.List(ctx, &nodes); err != nil || len(nodes.Items) == 0 {
		t.Fatalf("the local cluster's nodes: %v (%d)", err, len(nodes.Items))
	}
	return c, &localCluster{Cluster: lc, workdir: workdir}
}

// pid finds the process of the cluster's component (kube-apiserver, etcd):
// the one whose executable has that name and whose command line names the
// cluster's working directory.
func (lc *localCluster) pid(t *testing.T, component string) int {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil || len(data) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if filepath.Base(args[0]) != component || !strings.Contains(string(data), lc.workdir) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil {
			return pid
		}
	}
	t.Fatalf("no %s process of the local cluster in %s", component, lc.workdir)
	return 0
}

// cpuSeconds is the user and system CPU time of process pid
// (/proc/<pid>/stat, fields 14 and 15, in clock ticks of 1/100 s).
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name (field 2) may hold spaces: count from its ")".
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 13 {
		t.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

// logRequests logs the API server's requests of a round (the harness's
// own included: its creates and waits), most frequent first, for reading
// where a round's allocation goes.
func logRequests(t *testing.T, label string, w writeCounts) {
	keys := make([]writeKey, 0, len(w))
	total := 0.0
	for k, v := range w {
		if v > 0 {
			keys = append(keys, k)
			total += v
		}
	}
	sort.Slice(keys, func(i, j int) bool { return w[keys[i]] > w[keys[j]] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s=%d", k.verb, k.resource, int64(w[k])))
	}
	t.Logf("%s: %d API requests: %s", label, int64(total), strings.Join(parts, ", "))
}
