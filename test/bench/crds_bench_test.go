package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testfiles"
	"github.com/rukpak-dev/rukpak/internal/testnet"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
)

// ---------------------------------------------------------------- crds

// The crds scenario: the memory of a provisioner installing many large real
// CRDs (269 community operators, 89 MB of CRD YAML, took a
// provisioner to 780 MiB before its memory was bounded). Targets: steady RSS ≤ 256 MiB, peak ≤ 384 MiB.
const (
	crdsDefaultMiB = 80
	crdsSteadyRSS  = 256 << 10 // KiB
	crdsPeakRSS    = 384 << 10 // KiB
	// crdsSettle is how long the provisioner is left alone once every
	// BundleDeployment is Healthy before its steady RSS is read: an idle Go
	// process collects garbage at least every 2 minutes, and returns the
	// memory freed to the OS gradually after that.
	crdsSettle = 3 * time.Minute
)

// crdSource is the CRDs of one unit of the shared test data: a registry+v1
// bundle's manifests/, or the prometheus-operator-crds chart rendered with
// its defaults.
type crdSource struct {
	slug string
	crds []map[string]any
}

// crdSources reads every CRD of the shared test data, by source, as the
// files hold them.
func crdSources(t *testing.T) []crdSource {
	t.Helper()
	shared := testenv.SharedTestdata()
	dirs, err := filepath.Glob(filepath.Join(shared, "registry-v1", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []crdSource
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "manifests", "*"))
		if err != nil {
			t.Fatal(err)
		}
		var docs [][]byte
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, data)
		}
		if src := decodeCRDs(t, bundleSlug(filepath.Base(dir)), docs); len(src.crds) > 0 {
			out = append(out, src)
		}
	}
	var docs [][]byte
	for _, r := range testfiles.RenderChart(t, filepath.Join(shared, "helm", "prometheus-operator-crds")) {
		docs = append(docs, []byte(r))
	}
	out = append(out, decodeCRDs(t, "prometheus-operator-crds", docs))
	return out
}

// bundleSlug is a bundle directory's name without its version
// ("cert-manager-1.6.2" -> "cert-manager"): short enough for a DNS label.
func bundleSlug(dir string) string {
	return regexp.MustCompile(`-v?[0-9]+(\.[0-9]+)*$`).ReplaceAllString(dir, "")
}

func decodeCRDs(t *testing.T, slug string, docs [][]byte) crdSource {
	t.Helper()
	src := crdSource{slug: slug}
	for _, data := range docs {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s: %v", slug, err)
			}
			if u.GetKind() == "CustomResourceDefinition" {
				src.crds = append(src.crds, u.Object)
			}
		}
	}
	return src
}

// benchCRDs installs at least RUKPAK_BENCH_CRDS_MIB (80) MiB of CRD YAML
// through plain BundleDeployments, one per source per copy of the shared
// test data's CRDs, on a fresh API server and provisioner process, and
// reports the provisioner's peak and steady RSS with heap profiles.
func benchCRDs(t *testing.T, r *report, reg *testregistry.Registry) {
	ctx := context.Background()
	c := newCluster(t, reg)
	target := int64(crdsDefaultMiB)
	if n, err := strconv.ParseInt(os.Getenv("RUKPAK_BENCH_CRDS_MIB"), 10, 64); err == nil && n > 0 {
		target = n
	}
	target <<= 20
	sources := crdSources(t)

	// Copies of every source until the YAML reaches the target.
	type bd struct {
		name string
		src  rukpakv1alpha1.BundleSource
	}
	var (
		sets                [][][]byte // each BundleDeployment's CRDs, for the floor
		bds                 []bd
		total, largestBD    int64
		crds, largest, most int
	)
	for k := 1; total < target; k++ {
		for _, s := range sources {
			name := fmt.Sprintf("crds-%02d-%s", k, s.slug)
			files := map[string]string{}
			var size int64
			var set [][]byte
			for _, crd := range s.crds {
				n, y := testfiles.Regrouped(t, crd, name+".") // every copy a CRD of its own
				files["manifests/"+n+".yaml"] = string(y)
				set = append(set, y)
				size += int64(len(y))
				largest = max(largest, len(y))
			}
			if size > largestBD {
				largestBD, most = size, len(files)
			}
			crds += len(files)
			total += size
			bds = append(bds, bd{name, c.imageSource(t, "crds/"+name+":v1", testregistry.Layer(t, files))})
			sets = append(sets, set)
		}
	}
	shape := fmt.Sprintf("%d BundleDeployments, %d CRDs, %.1f MiB of YAML (largest BundleDeployment %.1f MiB in %d CRDs, largest CRD %.0f KiB)",
		len(bds), crds, float64(total)/(1<<20), float64(largestBD)/(1<<20), most, float64(largest)/1024)
	fmt.Printf("crds: %s\n", shape)

	// The floor first, on the same API server: the same CRDs, applied and
	// waited for Established by a bare client, then deleted.
	floor := c.crdsFloor(t, sets)

	pprofAddr := testnet.FreeAddr(t)
	p := c.startProvisioner(t, "crds", "--pprof-bind-address="+pprofAddr)
	time.Sleep(3 * time.Second) // let it start its informers: not part of the figure
	base := procStatus(t, p.cmd.Process.Pid, "VmRSS")
	profiles := profileDir(t)

	// Sample RSS and the heap while installing: the heap profile kept is the
	// one taken at the largest live heap (as of the last GC).
	stopSampling := make(chan struct{})
	var (
		sampled  sync.WaitGroup
		peakHeap uint64
		peakProf []byte
	)
	sampled.Go(func() {
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
			prof, err := fetch("http://" + pprofAddr + "/debug/pprof/heap")
			if err != nil {
				continue
			}
			if text, err := fetch("http://" + pprofAddr + "/debug/pprof/heap?debug=1"); err == nil {
				if h := memStat(text, "HeapAlloc"); h > peakHeap {
					peakHeap, peakProf = h, prof
				}
			}
		}
	})

	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, b := range bds {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := c.c.Create(ctx, newBD(b.name, rukpakv1alpha1.ProvisionerClassPlain, b.src)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	installed := c.waitAllCRDBDs(t, len(bds), rukpakv1alpha1.TypeInstalled, start, 45*time.Minute)
	healthy := c.waitAllCRDBDs(t, len(bds), rukpakv1alpha1.TypeHealthy, start, 15*time.Minute)
	close(stopSampling)
	sampled.Wait()
	hwm := p.hwm(t)

	// Steady: left alone, then RSS read every second for 30 s (median).
	time.Sleep(crdsSettle)
	var rss []int64
	for range 30 {
		rss = append(rss, procStatus(t, p.cmd.Process.Pid, "VmRSS"))
		time.Sleep(time.Second)
	}
	slices.Sort(rss)
	steady := rss[len(rss)/2]
	anon, file := procStatus(t, p.cmd.Process.Pid, "RssAnon"), procStatus(t, p.cmd.Process.Pid, "RssFile")
	steadyProf, err := fetch("http://" + pprofAddr + "/debug/pprof/heap?gc=1")
	if err != nil {
		t.Fatal(err)
	}
	text, err := fetch("http://" + pprofAddr + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	steadyHeap := memStat(text, "HeapAlloc")
	writeProfile(t, filepath.Join(profiles, "crds-peak.heap"), peakProf)
	writeProfile(t, filepath.Join(profiles, "crds-steady.heap"), steadyProf)

	r.add("crds", "crds: first create -> all Installed / all Healthy", secs(installed)+" / "+secs(healthy), "floor "+secs(floor), ratio(installed.Seconds(), floor.Seconds()),
		fmt.Sprintf("target ≤ 1.5× floor (the same CRDs applied by a bare client and waited for Established, %d BundleDeployments' at a time); %s", floorWorkers, shape))
	r.add("crds", "crds: provisioner peak RSS (VmHWM, separate process)", mib(hwm), "target ≤ 384 MiB", ratio(float64(hwm), crdsPeakRSS),
		fmt.Sprintf("RSS %s after start-up; largest live heap seen (HeapAlloc after a GC, sampled every 2 s) %s; profile %s",
			mib(base), mib(int64(peakHeap>>10)), filepath.Join(profiles, "crds-peak.heap")))
	r.add("crds", "crds: provisioner steady RSS", mib(steady), "target ≤ 256 MiB", ratio(float64(steady), crdsSteadyRSS),
		fmt.Sprintf("median of 30 s of VmRSS from %s after all Healthy (at the end: %s anonymous, %s of the binary's file pages); live heap after a forced GC %s; profile %s",
			crdsSettle, mib(anon), mib(file), mib(int64(steadyHeap>>10)), filepath.Join(profiles, "crds-steady.heap")))
}

// waitAllCRDBDs waits until all n crds-* BundleDeployments have condition
// typ True and returns the time since start.
func (c *cluster) waitAllCRDBDs(t *testing.T, n int, typ string, start time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		var l rukpakv1alpha1.BundleDeploymentList
		if err := c.c.List(ctx, &l); err != nil {
			t.Fatal(err)
		}
		done := 0
		var waiting []string
		for i := range l.Items {
			if !strings.HasPrefix(l.Items[i].Name, "crds-") {
				continue
			}
			if cond := conditions.Get(l.Items[i].Status.Conditions, typ); cond != nil && cond.Status == metav1.ConditionTrue {
				done++
			} else if len(waiting) < 3 {
				msg := "no condition"
				if cond != nil {
					msg = cond.Reason + ": " + cond.Message
				}
				waiting = append(waiting, l.Items[i].Name+" ("+msg+")")
			}
		}
		if done == n {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			sort.Strings(waiting)
			t.Fatalf("%d of %d bundle deployments %s after %s; for example %s", done, n, typ, timeout, strings.Join(waiting, "; "))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// profileDir keeps the heap profiles: RUKPAK_BENCH_LOGDIR, else a fresh
// directory under the system's temporary directory (kept after the run).
func profileDir(t *testing.T) string {
	if dir := os.Getenv("RUKPAK_BENCH_LOGDIR"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dir, err := os.MkdirTemp("", "rukpak-bench-crds-")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func fetch(url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// memStat reads one runtime.MemStats field from a debug=1 heap profile.
func memStat(text []byte, field string) uint64 {
	m := regexp.MustCompile(`(?m)^# ` + field + ` = (\d+)$`).FindSubmatch(text)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseUint(string(m[1]), 10, 64)
	return v
}

func writeProfile(t *testing.T, path string, data []byte) {
	t.Helper()
	if len(data) == 0 {
		return
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
