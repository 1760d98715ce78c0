package bundledeployment

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
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
