package helm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
)

// warmed starts a warm child and returns it.
func warmed(t *testing.T) *child {
	t.Helper()
	Warm()
	warm.Lock()
	defer warm.Unlock()
	if warm.child == nil {
		t.Fatal("Warm started no child")
	}
	return warm.child
}

// rendered waits for c to have exited and says whether it rendered (took
// a request and answered it) rather than being stopped unused.
func rendered(t *testing.T, c *child) bool {
	t.Helper()
	<-c.done
	return c.err == nil && c.stdout.Len() > 0
}

// TestWarmChildRenders: a render takes the warm child instead of starting
// its own, renders what a child started for it renders, and is bounded as
// such a child is (memory, time).
func TestWarmChildRenders(t *testing.T) {
	// Not parallel: the warm child is process-wide.
	in := FreezeInput{Release: chartutil.ReleaseOptions{Name: "rel", Namespace: "apps", Revision: 1, IsInstall: true}}
	ksm, err := LoadChart(os.DirFS(filepath.Join("../../../shared/testdata/helm", "kube-state-metrics")))
	if err != nil {
		t.Fatal(err)
	}
	cold, err := renderSandboxed(t.Context(), ksm, map[string]any{}, in, SandboxLimits{}.OrDefault())
	if err != nil {
		t.Fatal(err)
	}
	c := warmed(t)
	hot, err := renderSandboxed(t.Context(), ksm, map[string]any{}, in, SandboxLimits{}.OrDefault())
	if err != nil {
		t.Fatal(err)
	}
	if !rendered(t, c) {
		t.Fatalf("the warm child did not render: %v", c.err)
	}
	if len(hot.Files) == 0 || len(hot.Files) != len(cold.Files) {
		t.Fatalf("the warm child rendered %d files, a child started for the render %d", len(hot.Files), len(cold.Files))
	}
	for name, text := range cold.Files {
		if hot.Files[name] != text {
			t.Errorf("%s rendered by the warm child differs", name)
		}
	}

	hostile := func(template string) *chart.Chart {
		ch, err := LoadChart(fstest.MapFS{
			"Chart.yaml":        {Data: []byte("apiVersion: v2\nname: hostile\nversion: 1.0.0\n")},
			"templates/cm.yaml": {Data: []byte(template)},
		})
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	for _, tc := range []struct {
		name, template string
		limits         SandboxLimits
		wantErr        string
	}{{
		name:     "a string doubled without end",
		template: `{{ $s := "x" }}{{ range until 100 }}{{ $s = print $s $s }}{{ end }}{{ $s }}`,
		limits:   SandboxLimits{Memory: 64 << 20},
		wantErr:  `rendering chart "hostile" exceeded the memory limit of 64 MiB`,
	}, {
		name:     "a loop without end",
		template: `{{ range until 1000000 }}{{ range until 1000000 }}{{ end }}{{ end }}`,
		limits:   SandboxLimits{Timeout: 2 * time.Second},
		wantErr:  `rendering chart "hostile" did not finish within the time limit of 2s`,
	}, {
		name:     "output over the bound",
		template: `data: {{ repeat 300000 "x" }}`,
		limits:   SandboxLimits{Output: 200000},
		wantErr:  `rendering chart "hostile": the rendered templates exceed the limit of 200000 bytes`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := warmed(t)
			_, err := renderSandboxed(t.Context(), hostile(tc.template), map[string]any{}, in, tc.limits.OrDefault())
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !Refused(err) {
				t.Fatalf("error %v, want one refusing the render: %q", err, tc.wantErr)
			}
			<-c.done
			warm.Lock()
			left := warm.child
			warm.Unlock()
			if left == c {
				t.Fatal("the render did not take the warm child")
			}
		})
	}
}

// TestWarmChildStopsUnused: a warm child no render takes is stopped, and
// Warm then starts another.
func TestWarmChildStopsUnused(t *testing.T) {
	// Not parallel: the warm child and its idle time are process-wide.
	idle := warmIdle
	warmIdle = 100 * time.Millisecond
	t.Cleanup(func() { warmIdle = idle })
	c := warmed(t)
	if again := warmed(t); again != c {
		t.Fatal("Warm started a second child while one waits")
	}
	if rendered(t, c) {
		t.Fatal("the unused warm child rendered")
	}
	warm.Lock()
	left := warm.child
	warm.Unlock()
	if left != nil {
		t.Fatal("the stopped child is still the warm one")
	}
	if next := warmed(t); next == c {
		t.Fatal("Warm kept the stopped child")
	}
	if takeWarm() == nil {
		t.Fatal("no warm child to take")
	}
}
