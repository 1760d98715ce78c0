package statuspatch

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// The patch says of the status what controller-runtime's MergeFrom of the
// whole objects says, and nothing else.
func TestMergeFromMatchesWholeObjects(t *testing.T) {
	base := func() *rukpakv1alpha1.BundleDeployment {
		return &rukpakv1alpha1.BundleDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: "bd", ResourceVersion: "7", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
			Spec:       rukpakv1alpha1.BundleDeploymentSpec{ProvisionerClassName: "core-rukpak-io-plain"},
			Status: rukpakv1alpha1.BundleDeploymentStatus{
				ObservedGeneration: 1,
				ActiveBundle:       "old",
				Conditions: []metav1.Condition{
					{Type: "Installed", Status: metav1.ConditionFalse, Reason: "Installing", Message: "a"},
					{Type: "Healthy", Status: metav1.ConditionUnknown, Reason: "Unknown", Message: "b"},
				},
			},
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*rukpakv1alpha1.BundleDeployment)
	}{
		{"nothing", func(*rukpakv1alpha1.BundleDeployment) {}},
		{"condition changed", func(b *rukpakv1alpha1.BundleDeployment) {
			b.Status.Conditions[0].Status, b.Status.Conditions[0].Reason = metav1.ConditionTrue, "InstallationSucceeded"
		}},
		{"condition dropped", func(b *rukpakv1alpha1.BundleDeployment) { b.Status.Conditions = b.Status.Conditions[:1] }},
		{"field cleared", func(b *rukpakv1alpha1.BundleDeployment) { b.Status.ActiveBundle = "" }},
		{"generation moved", func(b *rukpakv1alpha1.BundleDeployment) { b.Status.ObservedGeneration = 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, after := base(), base()
			tc.change(after)
			whole, err := client.MergeFrom(before).Data(after)
			if err != nil {
				t.Fatal(err)
			}
			ours, err := MergeFrom(before.Status, after.Status).Data(after)
			if err != nil {
				t.Fatal(err)
			}
			var w, o map[string]any
			if err := json.Unmarshal(whole, &w); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(ours, &o); err != nil {
				t.Fatal(err)
			}
			if len(o) > 1 || (len(o) == 1 && o["status"] == nil) {
				t.Fatalf("patch %s says more than the status", ours)
			}
			if d := cmp.Diff(w["status"], o["status"]); d != "" {
				t.Fatalf("status (-whole objects +ours):\n%s", d)
			}
		})
	}
}
