package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testmetrics"
	"github.com/rukpak-dev/rukpak/internal/testnet"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
)

// ---------------------------------------------------------------- many

// The many scenario: N BundleDeployments of manyObjects ConfigMaps each (all
// in one namespace), for every N of RUKPAK_BENCH_MANY (comma-separated,
// default 1000; 10,000 is opt-in, about an hour more), e.g.
//
//	RUKPAK_BENCH_ONLY=many RUKPAK_BENCH_MANY=1000,10000
//
// Each size gets a fresh API server (envtest) and a fresh provisioner
// process, so no size inherits the previous one's objects, etcd or caches.
// Per size it prints: the time from the first create to all Installed (and
// per BundleDeployment) beside its floor (floors_bench_test.go: the same
// writes from a bare client, first, on the same API server), the provisioner's VmHWM (and per
// BundleDeployment), the API writes per install by verb and resource (the
// API server's apiserver_request_total, differenced; the harness's own
// creates of the BundleDeployments and the API server's lease heartbeats
// left out), the provisioner's reconciles per object and queue figures (its
// own /metrics), the writes per minute once steady, and a restart: the
// process is stopped and started again, and the time until it has
// reconciled every BundleDeployment and Bundle (its queues empty and its
// workers idle), its VmHWM and the writes it sent (target 0).

const (
	manyNamespace = "bench-many"
	// manyCreators is how many BundleDeployment creates are in flight.
	manyCreators = 16
	// restartQuiet is how long after a restarted provisioner has
	// re-verified everything its writes are still counted.
	restartQuiet = 10 * time.Second
)

// manySizes reads RUKPAK_BENCH_MANY.
func manySizes(t *testing.T) []int {
	t.Helper()
	spec := strings.TrimSpace(os.Getenv("RUKPAK_BENCH_MANY"))
	if spec == "" {
		return []int{1000}
	}
	var out []int
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || n > 100000 {
			t.Fatalf("RUKPAK_BENCH_MANY=%q: %q is not a count between 1 and 100000", spec, f)
		}
		out = append(out, n)
	}
	return out
}

func benchMany(t *testing.T, r *report, reg *testregistry.Registry) {
	sizes := manySizes(t)
	// One image per BundleDeployment, pushed once and shared by every size
	// (each size has its own API server; the objects' namespace is the
	// same).
	start := time.Now()
	// One transport for every push: Registry.Push makes one per call, and
	// their idle keep-alive connections (both ends in this process) ran
	// out of file descriptors at ~5,000 images.
	tr := reg.Transport()
	defer tr.(*http.Transport).CloseIdleConnections()
	pushOpts := append(reg.RemoteOptions(), remote.WithTransport(tr))
	srcs := make([]rukpakv1alpha1.BundleSource, slices.Max(sizes))
	for i := range srcs {
		files := map[string]string{}
		for j := range manyObjects {
			n := fmt.Sprintf("cm-%05d-%02d", i, j)
			files["manifests/"+n+".yaml"] = cmYAML(manyNamespace, n, i*manyObjects+j)
		}
		ref := pushWith(t, reg.Ref(fmt.Sprintf("many:%05d", i)), testregistry.Image(t, testregistry.Layer(t, files)), pushOpts)
		srcs[i] = rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage,
			Image: &rukpakv1alpha1.ImageSource{Ref: ref, CertificateData: string(reg.CAPEM)}}
	}
	fmt.Printf("many: pushed %d images in %.1f s\n", len(srcs), time.Since(start).Seconds())
	for _, n := range sizes {
		t.Run(fmt.Sprintf("many-%d", n), func(t *testing.T) { benchManySize(t, r, reg, srcs[:n]) })
	}
}

func benchManySize(t *testing.T, r *report, reg *testregistry.Registry, srcs []rukpakv1alpha1.BundleSource) {
	ctx := context.Background()
	n := len(srcs)
	label := fmt.Sprintf("many %s × %d", thousands(n), manyObjects)
	c := newCluster(t, reg)
	// The floor first, on the same API server, with nothing else running.
	floor := c.manyFloor(t, n)
	installed := c.watchInstalled(t)

	pm := c.startMetered(t, fmt.Sprintf("many-%d", n))
	time.Sleep(2 * time.Second) // let it start its informers: not part of the figure
	base := pm.proc.hwm(t)

	reqs0 := c.requests(t, false)
	sampling := pm.sampleQueues(scrapeEvery(n))
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, manyCreators)
	for i := range srcs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := c.c.Create(ctx, newBD(fmt.Sprintf("many-%05d", i), rukpakv1alpha1.ProvisionerClassPlain, srcs[i])); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	created := time.Since(start)
	total := installed.wait(t, n, start, 10*time.Minute+time.Duration(n)*300*time.Millisecond)
	maxDepth := sampling.stop()
	reqs := c.requests(t, false).sub(reqs0)
	after := pm.scrape(t)
	hwm := pm.proc.hwm(t)
	if got := c.countObjects(t, "ConfigMap", manyNamespace, "cm-"); got != n*manyObjects {
		t.Fatalf("%d ConfigMaps installed, want %d", got, n*manyObjects)
	}

	writes, reads := reqs.split()
	// The harness's own creates and the API server's heartbeat are not the
	// provisioner's.
	writes[writeKey{"POST", "bundledeployments"}] -= float64(n)
	delete(writes, writeKey{"PUT", "leases"})
	bdCtl, bCtl := "bundledeployment-"+rukpakv1alpha1.ProvisionerClassPlain, "bundle-"+rukpakv1alpha1.ProvisionerClassPlain
	r.add("many", label+": first create -> all Installed", secs(total), "floor "+secs(floor), ratio(total.Seconds(), floor.Seconds()),
		fmt.Sprintf("target ≤ 2× floor (the same 15 writes per install from a bare client, after its create, %d installs at a time); "+
			"%.1f ms per BundleDeployment; creates sent in %.1f s (%d at a time); reconciles per BundleDeployment %.2f, per Bundle %.2f; "+
			"largest BundleDeployment queue %d, mean wait in it %.0f ms; client-side rate limiter wait %.1f s in all",
			floorWorkers, total.Seconds()*1000/float64(n), created.Seconds(), manyCreators,
			after.sum("controller_runtime_reconcile_total", "controller", bdCtl)/float64(n),
			after.sum("controller_runtime_reconcile_total", "controller", bCtl)/float64(n),
			int(maxDepth[bdCtl]), 1000*after.mean("workqueue_queue_duration_seconds", "name", bdCtl),
			after.sum("rest_client_rate_limiter_duration_seconds_sum", "", "")))
	r.add("many", label+": API writes per install", fmt.Sprintf("%.2f", writes.totalf()/float64(n)), "target ≤ 15", "",
		"by verb and resource: "+writes.perEach(n)+"; reads per install: "+reads.perEach(n))
	r.add("many", label+": provisioner peak RSS (VmHWM, separate process)", mib(hwm), "target ≤ 384 MiB at 10,000", "",
		fmt.Sprintf("%.1f KiB per BundleDeployment over the %s after start-up", float64(hwm-base)/float64(n), mib(base)))

	time.Sleep(steadySettle)
	w0 := c.writes(t)
	time.Sleep(steadyWindow)
	steady := c.writes(t).sub(w0)
	delete(steady, writeKey{"PUT", "leases"})
	r.add("many", label+": API writes per minute once steady", fmt.Sprintf("%.0f", steady.totalf()*float64(time.Minute)/float64(steadyWindow)), "target 0", "",
		fmt.Sprintf("%d s window starting %d s after all Installed: [%s] (PUT leases, the API server's heartbeat, left out)",
			int(steadyWindow.Seconds()), int(steadySettle.Seconds()), steady.perEach(1)))

	// Restart: the same installations, a new process.
	pm.proc.stop(t)
	reqs0 = c.requests(t, false)
	restarted := time.Now()
	// The same id: the same storage directory, as a container restart keeps
	// its emptyDir.
	pm = c.startMetered(t, fmt.Sprintf("many-%d", n))
	verified := pm.waitReverified(t, n, restarted, 10*time.Minute+time.Duration(n)*150*time.Millisecond)
	rhwm := pm.proc.hwm(t)
	time.Sleep(restartQuiet)
	writes, reads = c.requests(t, false).sub(reqs0).split()
	delete(writes, writeKey{"PUT", "leases"})
	// The harness's own: the metrics reader's ServiceAccount, role and
	// token, and the reviews that authorize its scrapes (never stored).
	for _, res := range []string{"serviceaccounts", "serviceaccounts/token", "clusterroles", "clusterrolebindings", "tokenreviews", "subjectaccessreviews"} {
		delete(writes, writeKey{"POST", res})
	}
	r.add("many", label+": restart -> every BundleDeployment and Bundle reconciled", secs(verified), "", "",
		fmt.Sprintf("%.2f ms per BundleDeployment, from the process's start to its queues empty and workers idle; peak RSS %s (%.1f KiB per BundleDeployment over the first process's start-up)",
			verified.Seconds()*1000/float64(n), mib(rhwm), float64(rhwm-base)/float64(n)))
	r.add("many", label+": API writes after the restart", fmt.Sprintf("%.0f", writes.totalf()), "target 0", "",
		fmt.Sprintf("until %d s after re-verified: [%s] (PUT leases and the harness's metrics reader left out); reads per BundleDeployment: %s", int(restartQuiet.Seconds()), writes.perEach(1), reads.perEach(n)))
	pm.proc.stop(t)
}

// thousands writes n with thousands separators: 10000 -> 10,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// split separates mutating requests from reads.
func (w writeCounts) split() (writes, reads writeCounts) {
	writes, reads = writeCounts{}, writeCounts{}
	for k, v := range w {
		if v == 0 {
			continue
		}
		if mutatingVerb(k.verb) {
			writes[k] = v
		} else {
			reads[k] = v
		}
	}
	return writes, reads
}

func (w writeCounts) totalf() float64 {
	var n float64
	for _, v := range w {
		n += v
	}
	return n
}

// perEach lists the counts divided by n, largest first:
// "PATCH configmaps 10.00, POST secrets 1.00".
func (w writeCounts) perEach(n int) string {
	type kv struct {
		k writeKey
		v float64
	}
	var l []kv
	for k, v := range w {
		if v != 0 {
			l = append(l, kv{k, v})
		}
	}
	sort.Slice(l, func(i, j int) bool {
		if l[i].v != l[j].v {
			return l[i].v > l[j].v
		}
		return l[i].k.verb+l[i].k.resource < l[j].k.verb+l[j].k.resource
	})
	parts := make([]string, len(l))
	for i, x := range l {
		if n == 1 {
			parts[i] = fmt.Sprintf("%s %s %.0f", x.k.verb, x.k.resource, x.v)
		} else {
			parts[i] = fmt.Sprintf("%s %s %.2f", x.k.verb, x.k.resource, x.v/float64(n))
		}
	}
	return strings.Join(parts, ", ")
}

// countObjects counts the objects of a core kind in namespace whose name
// starts with prefix, reading metadata only, in pages.
func (c *cluster) countObjects(t *testing.T, kind, namespace, prefix string) int {
	t.Helper()
	count, cont := 0, ""
	for {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind + "List"))
		if err := c.c.List(context.Background(), l, client.InNamespace(namespace), client.Limit(5000), client.Continue(cont)); err != nil {
			t.Fatal(err)
		}
		for _, o := range l.Items {
			if strings.HasPrefix(o.Name, prefix) {
				count++
			}
		}
		if cont = l.Continue; cont == "" {
			return count
		}
	}
}

// ---------------------------------------------------------------- installed

// installedWatch counts BundleDeployments whose Installed condition is True,
// from a watch: polling a list of thousands of BundleDeployments would cost
// the API server (and the CPU the provisioner shares) more than what is
// measured.
type installedWatch struct {
	mu        sync.Mutex
	installed map[string]bool
	changed   chan struct{}
}

func (c *cluster) watchInstalled(t *testing.T) *installedWatch {
	t.Helper()
	w := &installedWatch{installed: map[string]bool{}, changed: make(chan struct{}, 1)}
	ca, err := cache.New(c.cfg, cache.Options{Scheme: c.env.Env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = ca.Start(ctx) }()
	inf, err := ca.GetInformer(ctx, &rukpakv1alpha1.BundleDeployment{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    w.update,
		UpdateFunc: func(_, o any) { w.update(o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if bd, ok := o.(*rukpakv1alpha1.BundleDeployment); ok {
				w.set(bd.Name, false)
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *installedWatch) update(o any) {
	if bd, ok := o.(*rukpakv1alpha1.BundleDeployment); ok && bd.Spec.ProvisionerClassName != floorClass {
		ok, _ := installed(bd)
		w.set(bd.Name, ok)
	}
}

func (w *installedWatch) set(name string, ok bool) {
	w.mu.Lock()
	if ok {
		w.installed[name] = true
	} else {
		delete(w.installed, name)
	}
	w.mu.Unlock()
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func (w *installedWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.installed)
}

// wait returns the time from start until n BundleDeployments are Installed.
func (w *installedWatch) wait(t *testing.T, n int, start time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if w.count() >= n {
			return time.Since(start)
		}
		select {
		case <-w.changed:
		case <-deadline.C:
			t.Fatalf("only %d of %d bundle deployments Installed after %s", w.count(), n, timeout)
		}
	}
}

// ---------------------------------------------------------------- provisioner metrics

// metered is a provisioner process whose /metrics the harness reads, over
// HTTPS with the token of a ServiceAccount bound to rukpak-metrics-reader,
// as Prometheus does.
type metered struct {
	proc  *proc
	url   string
	token string
}

func (m *metered) fetch() ([]byte, error) {
	code, body, err := testmetrics.Scrape(context.Background(), m.url, m.token)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", m.url, code, body)
	}
	return []byte(body), nil
}

// startMetered starts a provisioner serving its metrics on a free loopback
// port (extra flags after it) and waits until they answer.
func (c *cluster) startMetered(t *testing.T, id string, extra ...string) *metered {
	t.Helper()
	addr := testnet.FreeAddr(t)
	token := testmetrics.Token(t, c.cfg, provisionerNS, "bench-metrics", true)
	m := &metered{proc: c.startProvisioner(t, id, append([]string{"--metrics-bind-address=" + addr}, extra...)...), url: "https://" + addr + "/metrics", token: token}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := m.fetch(); err == nil {
			return m
		} else if time.Now().After(deadline) {
			t.Fatalf("provisioner metrics at %s: %v (log %s)", m.url, err, m.proc.log)
		}
		select {
		case <-m.proc.done:
			t.Fatalf("provisioner exited; log %s", m.proc.log)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (m *metered) scrape(t *testing.T) samples {
	t.Helper()
	text, err := m.fetch()
	if err != nil {
		t.Fatalf("reading provisioner metrics: %v", err)
	}
	return parseSamples(string(text))
}

// scrapeEvery is how often the harness reads the provisioner's /metrics
// while it works: a scrape serializes every series, and the provisioner
// keeps a few per BundleDeployment (its conditions), so at 1,000
// BundleDeployments a scrape every second took 11% of the provisioner's CPU
// (CPU profile of the install). 1 s plus 1 ms per BundleDeployment keeps
// the cost flat, and the resolution a small part of the phase measured.
func scrapeEvery(n int) time.Duration { return time.Second + time.Duration(n)*time.Millisecond }

// queueSampler records the largest depth of each work queue.
type queueSampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	max  map[string]float64
}

func (m *metered) sampleQueues(every time.Duration) *queueSampler {
	s := &queueSampler{done: make(chan struct{}), max: map[string]float64{}}
	s.wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
			text, err := m.fetch()
			if err != nil {
				continue
			}
			for _, x := range parseSamples(string(text)) {
				if x.name == "workqueue_depth" {
					s.mu.Lock()
					s.max[x.labels["name"]] = max(s.max[x.labels["name"]], x.value)
					s.mu.Unlock()
				}
			}
		}
	})
	return s
}

func (s *queueSampler) stop() map[string]float64 {
	close(s.done)
	s.wg.Wait()
	return s.max
}

// waitReverified waits until the provisioner has reconciled n
// BundleDeployments and n Bundles of the plain class since it started and
// its queues are empty and its workers idle: each BundleDeployment was
// queued once by the initial list, so by then each has been looked at.
func (m *metered) waitReverified(t *testing.T, n int, start time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	bdCtl, bCtl := "bundledeployment-"+rukpakv1alpha1.ProvisionerClassPlain, "bundle-"+rukpakv1alpha1.ProvisionerClassPlain
	deadline := time.Now().Add(timeout)
	for {
		s := m.scrape(t)
		if s.sum("controller_runtime_reconcile_total", "controller", bdCtl) >= float64(n) &&
			s.sum("controller_runtime_reconcile_total", "controller", bCtl) >= float64(n) &&
			s.sum("workqueue_depth", "", "") == 0 && s.sum("controller_runtime_active_workers", "", "") == 0 {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted provisioner did not re-verify %d bundle deployments in %s: %.0f reconciled, queues %.0f deep",
				n, timeout, s.sum("controller_runtime_reconcile_total", "controller", bdCtl), s.sum("workqueue_depth", "", ""))
		}
		time.Sleep(scrapeEvery(n))
	}
}

type sample struct {
	name   string
	labels map[string]string
	value  float64
}

type samples []sample

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)

// parseSamples reads the Prometheus text format, which is all /metrics
// serves without content negotiation.
func parseSamples(text string) samples {
	var out samples
	for _, line := range strings.Split(text, "\n") {
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		labels := map[string]string{}
		for _, l := range labelRe.FindAllStringSubmatch(m[2], -1) {
			labels[l[1]] = l[2]
		}
		out = append(out, sample{m[1], labels, v})
	}
	return out
}

// sum adds up metric name's samples whose label key is value (all of them
// for an empty key).
func (s samples) sum(name, key, value string) float64 {
	var total float64
	for _, x := range s {
		if x.name == name && (key == "" || x.labels[key] == value) {
			total += x.value
		}
	}
	return total
}

// mean is a histogram's sum over its count, for the samples whose label key
// is value.
func (s samples) mean(histogram, key, value string) float64 {
	count := s.sum(histogram+"_count", key, value)
	if count == 0 {
		return 0
	}
	return s.sum(histogram+"_sum", key, value) / count
}

// pushWith writes img under ref with opts and returns its digest reference.
func pushWith(t *testing.T, ref string, img v1.Image, opts []remote.Option) string {
	t.Helper()
	tag, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, opts...); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return tag.Context().Digest(d.String()).String()
}
