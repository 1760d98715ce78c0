package statuspatch

import (
	"encoding/json"
	"strings"
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
			sameAsWholeObjects(t, before, after, before.Status, after.Status)
		})
	}
}

// Nested objects: a member dropped from an object that stays is set to
// null, as the whole objects' MergeFrom says.
func TestMergeFromNestedMatchesWholeObjects(t *testing.T) {
	base := func() *rukpakv1alpha1.Bundle {
		return &rukpakv1alpha1.Bundle{
			ObjectMeta: metav1.ObjectMeta{Name: "b"},
			Status: rukpakv1alpha1.BundleStatus{
				Phase: "Unpacked",
				ResolvedSource: &rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage,
					Image: &rukpakv1alpha1.ImageSource{Ref: "r@sha256:1", ImagePullSecretName: "s", CertificateData: "c"}},
				ContentURL: "https://x",
			},
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*rukpakv1alpha1.Bundle)
	}{
		{"nested member dropped", func(b *rukpakv1alpha1.Bundle) { b.Status.ResolvedSource.Image.ImagePullSecretName = "" }},
		{"nested member changed", func(b *rukpakv1alpha1.Bundle) { b.Status.ResolvedSource.Image.Ref = "r@sha256:2" }},
		{"object dropped", func(b *rukpakv1alpha1.Bundle) { b.Status.ResolvedSource = nil }},
		{"object replaced by another kind", func(b *rukpakv1alpha1.Bundle) {
			b.Status.ResolvedSource = &rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit, Git: &rukpakv1alpha1.GitSource{Repository: "g"}}
		}},
		{"object added", func(b *rukpakv1alpha1.Bundle) { b.Status.ContentDigest = "sha256:" + strings.Repeat("0", 64) }},
		{"nothing", func(*rukpakv1alpha1.Bundle) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, after := base(), base()
			tc.change(after)
			sameAsWholeObjects(t, before, after, before.Status, after.Status)
		})
	}
}

// sameAsWholeObjects fails t unless the patch of the statuses says of the
// status what controller-runtime's MergeFrom of the whole objects does, and
// nothing else.
func sameAsWholeObjects(t *testing.T, before, after client.Object, beforeStatus, afterStatus any) {
	t.Helper()
	whole, err := client.MergeFrom(before).Data(after)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := MergeFrom(beforeStatus, afterStatus).Data(after)
	if err != nil {
		t.Fatal(err)
	}
	var w, o map[string]any
	if err := json.Unmarshal(whole, &w); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(ours, &o); err != nil {
		t.Fatalf("%s: %v", ours, err)
	}
	if len(o) > 1 || (len(o) == 1 && o["status"] == nil) {
		t.Fatalf("patch %s says more than the status", ours)
	}
	if d := cmp.Diff(w["status"], o["status"]); d != "" {
		t.Fatalf("patch %s; status (-whole objects +ours):\n%s", ours, d)
	}
}
