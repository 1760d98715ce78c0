package metrics

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rukpak-dev/rukpak/internal/testmetrics"
)

func series(t *testing.T, name string, match map[string]string) []string {
	t.Helper()
	return testmetrics.Series(t, name, match)
}

func TestConditionSeriesFollowConditions(t *testing.T) {
	cond := func(typ string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s}
	}
	steps := []struct {
		name  string
		conds []metav1.Condition
		want  []string
	}{
		{"paused and installed", []metav1.Condition{cond("Installed", metav1.ConditionTrue), cond("Paused", metav1.ConditionTrue)}, []string{
			"rukpak_condition{kind=BundleDeployment,name=m1,status=False,type=Installed} 0",
			"rukpak_condition{kind=BundleDeployment,name=m1,status=False,type=Paused} 0",
			"rukpak_condition{kind=BundleDeployment,name=m1,status=True,type=Installed} 1",
			"rukpak_condition{kind=BundleDeployment,name=m1,status=True,type=Paused} 1",
			"rukpak_condition{kind=BundleDeployment,name=m1,status=Unknown,type=Installed} 0",
			"rukpak_condition{kind=BundleDeployment,name=m1,status=Unknown,type=Paused} 0",
		}},
		{"resumed: Paused goes, Installed fails", []metav1.Condition{cond("Installed", metav1.ConditionFalse)}, []string{
			"rukpak_condition{kind=BundleDeployment,name=m1,status=False,type=Installed} 1",
			"rukpak_condition{kind=BundleDeployment,name=m1,status=True,type=Installed} 0",
			"rukpak_condition{kind=BundleDeployment,name=m1,status=Unknown,type=Installed} 0",
		}},
	}
	for _, s := range steps {
		RecordConditions("BundleDeployment", "m1", s.conds)
		RecordConditions("Bundle", "m1", s.conds) // same name, other kind: kept apart
		if got := series(t, NameCondition, map[string]string{"kind": "BundleDeployment", "name": "m1"}); strings.Join(got, "\n") != strings.Join(s.want, "\n") {
			t.Errorf("%s: series\n%s\nwant\n%s", s.name, strings.Join(got, "\n"), strings.Join(s.want, "\n"))
		}
	}
	Forget("BundleDeployment", "m1")
	if got := series(t, NameCondition, map[string]string{"kind": "BundleDeployment", "name": "m1"}); len(got) != 0 {
		t.Errorf("after Forget: %v", got)
	}
	if got := series(t, NameCondition, map[string]string{"kind": "Bundle", "name": "m1"}); len(got) != 3 {
		t.Errorf("the Bundle's series went too: %v", got)
	}
	Forget("Bundle", "m1")
}

func TestForgetDropsPerObjectSeries(t *testing.T) {
	Release("f1", 1234, 7)
	DriftCorrected("c", "f1", 2)
	DriftCorrected("c", "f1", 0) // no corrections: no series change
	want := map[string][]string{
		NameReleaseSize:      {"rukpak_release_size_bytes{name=f1} 1234"},
		NameReleaseObjects:   {"rukpak_release_objects{name=f1} 7"},
		NameDriftCorrections: {"rukpak_drift_corrections_total{class=c,name=f1} 2"},
	}
	for name, w := range want {
		if got := series(t, name, map[string]string{"name": "f1"}); strings.Join(got, "\n") != strings.Join(w, "\n") {
			t.Errorf("%s = %v, want %v", name, got, w)
		}
	}
	Forget("BundleDeployment", "f1")
	for name := range want {
		if got := series(t, name, map[string]string{"name": "f1"}); len(got) != 0 {
			t.Errorf("%s after Forget: %v", name, got)
		}
	}
}

func TestObserveUnpack(t *testing.T) {
	ObserveUnpack("u-class", "image", 2*time.Second, 100, nil)
	ObserveUnpack("u-class", "image", time.Second, 50, nil)
	ObserveUnpack("u-class", "image", time.Second, 999, errors.New("boom"))
	if got, want := series(t, NameUnpackedBytes, map[string]string{"class": "u-class"}), []string{"rukpak_unpacked_bytes_total{class=u-class,source_type=image} 150"}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("bytes = %v, want %v", got, want)
	}
	want := []string{
		"rukpak_unpack_duration_seconds{class=u-class,result=failure,source_type=image} count=1",
		"rukpak_unpack_duration_seconds{class=u-class,result=success,source_type=image} count=2",
	}
	if got := series(t, NameUnpackDuration, map[string]string{"class": "u-class"}); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("durations = %v, want %v", got, want)
	}
}

func TestConditionSeriesAreBounded(t *testing.T) {
	conds := make([]metav1.Condition, 100)
	for i := range conds {
		conds[i] = metav1.Condition{Type: fmt.Sprintf("Injected%d", i), Status: metav1.ConditionTrue}
	}
	RecordConditions("BundleDeployment", "b1", conds)
	defer Forget("BundleDeployment", "b1")
	if got := series(t, NameCondition, map[string]string{"name": "b1"}); len(got) != 3*maxConditions {
		t.Errorf("%d series, want %d", len(got), 3*maxConditions)
	}
}

// A status is anyone's to write: a condition type given twice, or a name or
// type that is not UTF-8, still leaves every scrape working.
func TestConditionSeriesOfHostileStatuses(t *testing.T) {
	RecordConditions("BundleDeployment", "h1", []metav1.Condition{
		{Type: "Installed", Status: metav1.ConditionFalse},
		{Type: "Installed", Status: metav1.ConditionTrue},
		{Type: "Bad\xff", Status: metav1.ConditionTrue},
	})
	defer Forget("BundleDeployment", "h1")
	RecordConditions("Bundle", "h2\xfe", []metav1.Condition{{Type: "Unpacked", Status: metav1.ConditionTrue}})
	defer Forget("Bundle", "h2\xfe")
	want := []string{
		"rukpak_condition{kind=BundleDeployment,name=h1,status=False,type=Bad\uFFFD} 0",
		"rukpak_condition{kind=BundleDeployment,name=h1,status=False,type=Installed} 0",
		"rukpak_condition{kind=BundleDeployment,name=h1,status=True,type=Bad\uFFFD} 1",
		"rukpak_condition{kind=BundleDeployment,name=h1,status=True,type=Installed} 1",
		"rukpak_condition{kind=BundleDeployment,name=h1,status=Unknown,type=Bad\uFFFD} 0",
		"rukpak_condition{kind=BundleDeployment,name=h1,status=Unknown,type=Installed} 0",
	}
	if got := series(t, NameCondition, map[string]string{"name": "h1"}); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("series\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := series(t, NameCondition, map[string]string{"kind": "Bundle", "name": "h2\uFFFD"}); len(got) != 3 {
		t.Errorf("Bundle series %v, want 3", got)
	}
	// No conditions: no series.
	RecordConditions("BundleDeployment", "h1", nil)
	if got := series(t, NameCondition, map[string]string{"name": "h1"}); len(got) != 0 {
		t.Errorf("series without conditions: %v", got)
	}
}
