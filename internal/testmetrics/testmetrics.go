// Package testmetrics reads series from controller-runtime's metrics
// registry as a scrape would see them, for tests that assert metric values.
package testmetrics

import (
	"sort"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Series returns `name{label=value,...} value` for every series of the
// family name whose labels include match, sorted; a histogram's value is
// `count=N`.
func Series(tb testing.TB, name string, match map[string]string) []string {
	tb.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		tb.Fatalf("gathering metrics: %v", err)
	}
	var out []string
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if line, ok := format(name, m, match); ok {
				out = append(out, line)
			}
		}
	}
	sort.Strings(out)
	return out
}

func format(name string, m *dto.Metric, match map[string]string) (string, bool) {
	labels := map[string]string{}
	parts := make([]string, 0, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	for k, v := range match {
		if labels[k] != v {
			return "", false
		}
	}
	var value string
	switch {
	case m.GetGauge() != nil:
		value = num(m.GetGauge().GetValue())
	case m.GetCounter() != nil:
		value = num(m.GetCounter().GetValue())
	case m.GetHistogram() != nil:
		value = "count=" + strconv.FormatUint(m.GetHistogram().GetSampleCount(), 10)
	}
	return name + "{" + strings.Join(parts, ",") + "} " + value, true
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// Value returns the value of the one series of name matching match (0 when
// there is none); it fails the test if several match.
func Value(tb testing.TB, name string, match map[string]string) float64 {
	tb.Helper()
	s := Series(tb, name, match)
	switch len(s) {
	case 0:
		return 0
	case 1:
	default:
		tb.Fatalf("%d series of %s match %v: %v", len(s), name, match, s)
	}
	v := s[0][strings.LastIndexByte(s[0], ' ')+1:]
	f, err := strconv.ParseFloat(strings.TrimPrefix(v, "count="), 64)
	if err != nil {
		tb.Fatalf("series %q: %v", s[0], err)
	}
	return f
}
