package helm_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/release"

	"github.com/rukpak-dev/rukpak/provisioner/helm"
)

// templateRelease runs Helm's install action client-only on ch, as
// `helm template` does, in this process.
func templateRelease(t *testing.T, ch *chart.Chart, vals map[string]any) *release.Release {
	t.Helper()
	act := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	act.DryRun, act.ClientOnly, act.Replace = true, true, true
	act.ReleaseName, act.Namespace = "rel", "apps"
	rel, err := act.RunWithContext(t.Context(), ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

var templateInput = helm.FreezeInput{Release: chartutil.ReleaseOptions{Name: "rel", Namespace: "apps", Revision: 1, IsInstall: true}}

// TestFreezeRealCharts: installing a frozen chart installs what the chart
// renders to (manifest, hooks, notes), for every chart of the test data,
// subcharts, a disabled subchart and partials included.
func TestFreezeRealCharts(t *testing.T) {
	for _, tc := range []struct {
		chart string
		vals  map[string]any
	}{
		{chart: "hello-world"},
		{chart: "kube-state-metrics", vals: map[string]any{"selfMonitor": map[string]any{"enabled": true}}},
		{chart: "prometheus-operator-admission-webhook", vals: map[string]any{"networkPolicy": map[string]any{"enabled": true}}},
		{chart: "prometheus-operator-crds"},
		{chart: "prometheus-operator-crds", vals: map[string]any{"crds": map[string]any{"enabled": false}}},
	} {
		t.Run(tc.chart, func(t *testing.T) {
			load := func() *chart.Chart {
				ch, err := helm.LoadChart(os.DirFS(filepath.Join(testdata, tc.chart)))
				if err != nil {
					t.Fatal(err)
				}
				return ch
			}
			ch := load()
			frozen, err := helm.Freeze(t.Context(), ch, copyValues(tc.vals), templateInput, helm.SandboxLimits{})
			if err != nil {
				t.Fatal(err)
			}
			want := templateRelease(t, load(), copyValues(tc.vals))
			got := templateRelease(t, frozen, copyValues(tc.vals))
			if got.Manifest != want.Manifest {
				t.Errorf("manifest of the frozen chart:\n%s\nwant:\n%s", got.Manifest, want.Manifest)
			}
			if got.Info.Notes != want.Info.Notes {
				t.Errorf("notes %q, want %q", got.Info.Notes, want.Info.Notes)
			}
			if len(got.Hooks) != len(want.Hooks) {
				t.Fatalf("%d hooks, want %d", len(got.Hooks), len(want.Hooks))
			}
			for i := range want.Hooks {
				if g, w := got.Hooks[i], want.Hooks[i]; g.Path != w.Path || g.Manifest != w.Manifest || g.Weight != w.Weight {
					t.Errorf("hook %d: %s weight %d\n%s\nwant %s weight %d\n%s", i, g.Path, g.Weight, g.Manifest, w.Path, w.Weight, w.Manifest)
				}
			}
			if len(ch.Templates) > 0 && len(frozen.Templates) == len(ch.Templates) && string(frozen.Templates[0].Data) == string(ch.Templates[0].Data) {
				t.Errorf("template %s was not frozen", ch.Templates[0].Name)
			}
		})
	}
}

func copyValues(v map[string]any) map[string]any {
	if v == nil {
		return map[string]any{}
	}
	return chartutil.Values(v).AsMap()
}

// hostile is a chart of one template.
func hostile(t *testing.T, template string) *chart.Chart {
	t.Helper()
	ch, err := helm.LoadChart(fstest.MapFS{
		"Chart.yaml":          {Data: []byte("apiVersion: v2\nname: hostile\nversion: 1.0.0\n")},
		"templates/cm.yaml":   {Data: []byte(template)},
		"templates/_help.tpl": {Data: []byte(`{{ define "q" }}{{ . | quote }}{{ end }}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// TestFreezeLimits: a chart over a limit is refused with a message naming
// it, within the limit (the child is killed or fails; nothing runs in the
// test's process).
func TestFreezeLimits(t *testing.T) {
	tests := []struct {
		name, template string
		limits         helm.SandboxLimits
		wantErr        string
	}{{
		name:     "a string doubled without end",
		template: `{{ $s := "x" }}{{ range until 100 }}{{ $s = print $s $s }}{{ end }}{{ $s }}`,
		limits:   helm.SandboxLimits{Memory: 64 << 20},
		wantErr:  `rendering chart "hostile" exceeded the memory limit of 64 MiB`,
	}, {
		name:     "one huge allocation",
		template: `{{ repeat 2000000000 "x" }}`,
		limits:   helm.SandboxLimits{Memory: 64 << 20},
		wantErr:  `rendering chart "hostile" exceeded the memory limit of 64 MiB`,
	}, {
		name:     "a loop without end",
		template: `{{ range until 1000000 }}{{ range until 1000000 }}{{ end }}{{ end }}`,
		limits:   helm.SandboxLimits{Timeout: 2 * time.Second},
		wantErr:  `rendering chart "hostile" did not finish within the time limit of 2s`,
	}, {
		name:     "output over the bound",
		template: `data: {{ repeat 300000 "x" }}`,
		limits:   helm.SandboxLimits{Output: 200000},
		wantErr:  `rendering chart "hostile": the rendered templates exceed the limit of 200000 bytes`,
	}, {
		name:     "a failing template",
		template: `{{ fail "no" }}`,
		wantErr:  `execution error at (hostile/templates/cm.yaml:1:3): no`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := helm.Freeze(t.Context(), hostile(t, tt.template), map[string]any{}, templateInput, tt.limits)
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("error:\n%v\nwant:\n%s", err, tt.wantErr)
			}
		})
	}
}

// TestFreezeRendersOnce: what the child rendered is installed as it is:
// random values are not drawn again, and text a template prints (back
// quotes, template delimiters) stays text.
func TestFreezeRendersOnce(t *testing.T) {
	ch := hostile(t, "a: {{ randAlphaNum 32 | quote }}\nb: {{ include \"q\" \"`{{ .Values }}`\" }}\n")
	frozen, err := helm.Freeze(t.Context(), ch, map[string]any{}, templateInput, helm.SandboxLimits{})
	if err != nil {
		t.Fatal(err)
	}
	first := templateRelease(t, frozen, map[string]any{}).Manifest
	if second := templateRelease(t, frozen, map[string]any{}).Manifest; second != first {
		t.Errorf("frozen chart rendered twice:\n%s\nthen:\n%s", first, second)
	}
	if !strings.Contains(first, "b: \"`{{ .Values }}`\"\n") {
		t.Errorf("back quotes and delimiters not kept:\n%s", first)
	}
}

// TestFreezeCancelled: cancelling the caller's context stops the child,
// and says so rather than blaming a limit.
func TestFreezeCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(500*time.Millisecond, cancel)
	_, err := helm.Freeze(ctx, hostile(t, `{{ range until 1000000 }}{{ range until 1000000 }}{{ end }}{{ end }}`), map[string]any{}, templateInput, helm.SandboxLimits{})
	if want := `rendering chart "hostile": context canceled`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

// BenchmarkFreeze is what rendering in a child process costs over
// rendering in process: kube-state-metrics (19 templates) rendered by
// Freeze (the child's start included) and by Helm's engine here.
func BenchmarkFreeze(b *testing.B) {
	ch, err := helm.LoadChart(os.DirFS(filepath.Join(testdata, "kube-state-metrics")))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("child process", func(b *testing.B) {
		for b.Loop() {
			if _, err := helm.Freeze(b.Context(), ch, map[string]any{}, templateInput, helm.SandboxLimits{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("warm child process", func(b *testing.B) {
		// The child started (helm.Warm) well before the render, as a
		// BundleDeployment's first reconcile starts it while its Bundle
		// unpacks: the render waits for no start.
		for b.Loop() {
			b.StopTimer()
			helm.Warm()
			time.Sleep(300 * time.Millisecond)
			b.StartTimer()
			if _, err := helm.Freeze(b.Context(), ch, map[string]any{}, templateInput, helm.SandboxLimits{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("in process", func(b *testing.B) {
		for b.Loop() {
			vals, err := chartutil.ToRenderValues(ch, map[string]any{}, templateInput.Release, chartutil.DefaultCapabilities)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := engine.Render(ch, vals); err != nil {
				b.Fatal(err)
			}
		}
	})
}
