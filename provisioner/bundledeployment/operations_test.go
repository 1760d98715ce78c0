package bundledeployment

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
)

func TestPaused(t *testing.T) {
	for _, tc := range []struct {
		name       string
		paused     bool
		hadPaused  bool
		wantPaused bool
	}{
		{"running stays without the condition", false, false, false},
		{"pausing sets the condition", true, false, true},
		{"resuming removes the condition", false, true, false},
		{"staying paused keeps it", true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{}
			bd := &rukpakv1alpha1.BundleDeployment{Spec: rukpakv1alpha1.BundleDeploymentSpec{Paused: tc.paused}}
			if tc.hadPaused {
				r.set(bd, rukpakv1alpha1.TypePaused, metav1.ConditionTrue, rukpakv1alpha1.ReasonPaused, pausedMessage)
			}
			if got := r.paused(bd); got != tc.wantPaused {
				t.Errorf("paused = %v, want %v", got, tc.wantPaused)
			}
			c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypePaused)
			switch {
			case tc.wantPaused && (c == nil || c.Status != metav1.ConditionTrue || c.Reason != rukpakv1alpha1.ReasonPaused || c.Message != pausedMessage):
				t.Errorf("Paused condition = %+v", c)
			case !tc.wantPaused && c != nil:
				t.Errorf("Paused condition left: %+v", c)
			}
		})
	}
}

func TestHandledRequest(t *testing.T) {
	long := strings.Repeat("x", maxRequestValue+1)
	for _, tc := range []struct {
		name        string
		annotation  *string
		recorded    string
		want        string
		wantWarning bool
	}{
		{"no request", nil, "", "", false},
		{"new request", ptr("2026-11-22T20:00:00Z"), "", "2026-11-22T20:00:00Z", false},
		{"next request", ptr("b"), "a", "b", false},
		{"already handled", ptr("a"), "a", "a", false},
		{"too long to record", ptr(long), "a", "a", true},
		{"longest recorded", ptr(long[1:]), "a", long[1:], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(1)
			r := &Reconciler{Recorder: rec}
			bd := &rukpakv1alpha1.BundleDeployment{Status: rukpakv1alpha1.BundleDeploymentStatus{LastHandledReconcileAt: tc.recorded}}
			if tc.annotation != nil {
				bd.Annotations = map[string]string{rukpakv1alpha1.AnnotationReconcileRequestedAt: *tc.annotation}
			}
			r.handledRequest(bd)
			if bd.Status.LastHandledReconcileAt != tc.want {
				t.Errorf("lastHandledReconcileAt = %q, want %q", bd.Status.LastHandledReconcileAt, tc.want)
			}
			var got string
			select {
			case got = <-rec.Events:
			default:
			}
			want := ""
			if tc.wantWarning {
				want = "Warning ReconcileRequestNotRecorded The value of annotation core.rukpak.io/reconcile-requested-at is longer than 256 bytes: reconciled, but not recorded in status.lastHandledReconcileAt"
			}
			if got != want {
				t.Errorf("event = %q, want %q", got, want)
			}
		})
	}
}

func TestAnnotationChanged(t *testing.T) {
	bd := func(v string) client.Object {
		o := &rukpakv1alpha1.BundleDeployment{}
		if v != "" {
			o.Annotations = map[string]string{rukpakv1alpha1.AnnotationReconcileRequestedAt: v, "other": v}
		}
		return o
	}
	for _, tc := range []struct {
		name     string
		old, new client.Object
		want     bool
	}{
		{"set", bd(""), bd("a"), true},
		{"changed", bd("a"), bd("b"), true},
		{"removed", bd("a"), bd(""), true},
		{"unchanged", bd("a"), bd("a"), false},
		{"other annotation only", bd("a"), func() client.Object { o := bd("a"); o.GetAnnotations()["other"] = "x"; return o }(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := reconcileRequested.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("Update = %v, want %v", got, tc.want)
			}
		})
	}
	if reconcileRequested.Create(event.CreateEvent{Object: bd("a")}) {
		t.Errorf("a create passed: the generation filter handles those")
	}
}
