package testfiles

import (
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// RenderChart renders the chart in dir with Helm's engine and its default
// values, and returns the rendered YAML templates' contents in name
// order. It
// skips the test if dir holds no chart (shared test data not available).
func RenderChart(tb testing.TB, dir string) []string {
	tb.Helper()
	chrt, err := loader.Load(dir)
	if err != nil {
		tb.Skipf("shared test data not available: %v", err)
	}
	values, err := chartutil.ToRenderValues(chrt, nil, chartutil.ReleaseOptions{Name: "crds", Namespace: "default"}, chartutil.DefaultCapabilities)
	if err != nil {
		tb.Fatal(err)
	}
	rendered, err := engine.Render(chrt, values)
	if err != nil {
		tb.Fatal(err)
	}
	names := make([]string, 0, len(rendered))
	for n := range rendered {
		if strings.HasSuffix(n, ".yaml") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, rendered[n])
	}
	return out
}
