package bundledeployment

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
)

// warmingInstaller counts the calls to Warm.
type warmingInstaller struct {
	Installer
	warmed int
}

func (w *warmingInstaller) Warm() { w.warmed++ }

// TestContentWarmsWhileUnpacking: the installer is told to get ready while
// the Bundle has not reported or is unpacking, and not once its unpack
// failed (no install comes).
func TestContentWarmsWhileUnpacking(t *testing.T) {
	class := rukpakv1alpha1.ProvisionerClassHelm
	bundle := func(cond *metav1.Condition) *rukpakv1alpha1.Bundle {
		b := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app-x", Generation: 1}, Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: class}}
		if cond != nil {
			b.Status.ObservedGeneration = 1
			b.Status.Conditions = []metav1.Condition{*cond}
		}
		return b
	}
	for _, tc := range []struct {
		name string
		b    *rukpakv1alpha1.Bundle
		want int
	}{
		{"not reported", bundle(nil), 1},
		{"unpacking", bundle(&metav1.Condition{Type: rukpakv1alpha1.TypeUnpacked, Status: metav1.ConditionFalse, Reason: rukpakv1alpha1.ReasonUnpackPending}), 1},
		{"unpack failed", bundle(&metav1.Condition{Type: rukpakv1alpha1.TypeUnpacked, Status: metav1.ConditionFalse, Reason: rukpakv1alpha1.ReasonUnpackFailed, Message: "no"}), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &warmingInstaller{}
			r := &Reconciler{Class: class, Installer: w, BundleClasses: []string{class}}
			bd := &rukpakv1alpha1.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "app"}}
			_, _, ready, err := r.content(t.Context(), bd, tc.b)
			if err != nil || ready {
				t.Fatalf("content: ready %v, error %v; want neither", ready, err)
			}
			if w.warmed != tc.want {
				t.Errorf("Warm called %d times, want %d", w.warmed, tc.want)
			}
		})
	}
}

// TestContentMessages: HasValidBundle says what RukPak's said while the
// Bundle unpacks and after its unpack failed, word for word, then what the
// Bundle reports.
func TestContentMessages(t *testing.T) {
	class := rukpakv1alpha1.ProvisionerClassPlain
	bundle := func(reason, msg string) *rukpakv1alpha1.Bundle {
		return &rukpakv1alpha1.Bundle{
			ObjectMeta: metav1.ObjectMeta{Name: "app-x", Generation: 1},
			Spec:       rukpakv1alpha1.BundleSpec{ProvisionerClassName: class},
			Status: rukpakv1alpha1.BundleStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{
				{Type: rukpakv1alpha1.TypeUnpacked, Status: metav1.ConditionFalse, Reason: reason, Message: msg}}},
		}
	}
	for _, tc := range []struct {
		name   string
		b      *rukpakv1alpha1.Bundle
		status metav1.ConditionStatus
		reason string
		want   string
	}{
		{"unpacking", bundle(rukpakv1alpha1.ReasonUnpacking, ""), metav1.ConditionUnknown, rukpakv1alpha1.ReasonUnpackPending,
			"Waiting for the app-x Bundle to be unpacked"},
		{"unpacking, with the Bundle's message", bundle(rukpakv1alpha1.ReasonUnpacking, "Fetching the bundle's source"), metav1.ConditionUnknown, rukpakv1alpha1.ReasonUnpackPending,
			"Waiting for the app-x Bundle to be unpacked: Fetching the bundle's source"},
		{"failed", bundle(rukpakv1alpha1.ReasonUnpackFailed, `source bundle content: get configmap rukpak-system/non-exist: ConfigMap "non-exist" not found`),
			metav1.ConditionFalse, rukpakv1alpha1.ReasonUnpackFailed,
			`Failed to unpack the app-x Bundle: source bundle content: get configmap rukpak-system/non-exist: ConfigMap "non-exist" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{Class: class, BundleClasses: []string{class}}
			bd := &rukpakv1alpha1.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "app"}}
			if _, _, _, err := r.content(t.Context(), bd, tc.b); err != nil {
				t.Fatal(err)
			}
			c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypeHasValidBundle)
			if c == nil || c.Status != tc.status || c.Reason != tc.reason || c.Message != tc.want {
				t.Fatalf("HasValidBundle = %+v\nwant %s %s %q", c, tc.status, tc.reason, tc.want)
			}
		})
	}
}
