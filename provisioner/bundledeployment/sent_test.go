package bundledeployment

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// TestCatchUp: a BundleDeployment read from a cache that has not seen this
// process's status writes starts from what they sent; one at any other
// version (after the writes, or written by someone else) keeps its own.
func TestCatchUp(t *testing.T) {
	withStatus := func(rv, installed string) *rukpakv1alpha1.BundleDeployment {
		return &rukpakv1alpha1.BundleDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: "bd", UID: "uid-1", ResourceVersion: rv},
			Status: rukpakv1alpha1.BundleDeploymentStatus{
				Conditions:       []metav1.Condition{{Type: rukpakv1alpha1.TypeInstalled, Status: metav1.ConditionStatus(installed)}},
				GeneratedBundles: []rukpakv1alpha1.GeneratedBundle{{Name: "b-" + rv}},
			},
		}
	}
	var rs records
	// Two writes in a row: 10 -> 11 (Unknown), 11 -> 12 (True); then a
	// write made from elsewhere, 20 -> 21, starts a new chain.
	rs.wrote(withStatus("11", "Unknown"), "10")
	rs.wrote(withStatus("12", "True"), "11")

	for _, tc := range []struct {
		name, cachedRV, want string
	}{
		{"the cache before both writes", "10", "True"},
		{"the cache between them", "11", "True"},
		{"the cache caught up", "12", "False"},
		{"someone else wrote since", "13", "False"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bd := withStatus(tc.cachedRV, "False")
			rs.catchUp(bd)
			if got := string(bd.Status.Conditions[0].Status); got != tc.want {
				t.Errorf("Installed %s, want %s", got, tc.want)
			}
			if bd.Status.GeneratedBundles[0].Name != "b-"+tc.cachedRV {
				t.Errorf("generatedBundles %v changed: load owns them", bd.Status.GeneratedBundles)
			}
		})
	}

	if len(rs.sent) != 0 {
		t.Errorf("the sent status is kept after the cache caught up with it: %v", rs.sent)
	}
	// Writes after the cache caught up start a new chain.
	rs.wrote(withStatus("13", "True"), "12")
	if bd := withStatus("12", "False"); func() string { rs.catchUp(bd); return string(bd.Status.Conditions[0].Status) }() != "True" {
		t.Error("a write after the cache caught up is not caught up with")
	}

	rs.wrote(withStatus("21", "True"), "20")
	if bd := withStatus("10", "False"); func() string { rs.catchUp(bd); return string(bd.Status.Conditions[0].Status) }() != "False" {
		t.Error("a write that did not follow the last one still covers the versions before it")
	}
	rs.dropUID("uid-1")
	if bd := withStatus("20", "False"); func() string { rs.catchUp(bd); return string(bd.Status.Conditions[0].Status) }() != "False" {
		t.Error("a dropped BundleDeployment still has a sent status")
	}
}
