package bundledeployment

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
)

// The cases where a pivot goes ahead: no waiting, the PivotPending state
// cleared, and an event only when a waiting pivot was approved.
func TestHoldPivotGoesAhead(t *testing.T) {
	const approvedEvent = "Normal PivotApproved Pivot from bundle \"bd-old\" to bundle \"bd-new\" approved by annotation core.rukpak.io/approved-bundle"
	for _, tc := range []struct {
		name      string
		mode      rukpakv1alpha1.UpgradeApproval
		active    string
		approved  string
		pending   string
		wantEvent string
	}{
		{name: "automatic (unset)", active: "bd-old"},
		{name: "automatic", mode: rukpakv1alpha1.UpgradeApprovalAutomatic, active: "bd-old", pending: "bd-new"},
		{name: "manual: first install", mode: rukpakv1alpha1.UpgradeApprovalManual},
		{name: "manual: the active bundle", mode: rukpakv1alpha1.UpgradeApprovalManual, active: "bd-new"},
		{name: "manual: approved while waiting", mode: rukpakv1alpha1.UpgradeApprovalManual, active: "bd-old", approved: "bd-new", pending: "bd-new", wantEvent: approvedEvent},
		{name: "manual: approved before it waited", mode: rukpakv1alpha1.UpgradeApprovalManual, active: "bd-old", approved: "bd-new"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(1)
			r := &Reconciler{Recorder: rec}
			bd := &rukpakv1alpha1.BundleDeployment{
				ObjectMeta: metav1.ObjectMeta{Name: "bd", Annotations: map[string]string{}},
				Spec:       rukpakv1alpha1.BundleDeploymentSpec{UpgradeApproval: tc.mode},
				Status:     rukpakv1alpha1.BundleDeploymentStatus{ActiveBundle: tc.active, PendingBundle: tc.pending},
			}
			if tc.approved != "" {
				bd.Annotations[rukpakv1alpha1.AnnotationApprovedBundle] = tc.approved
			}
			if tc.pending != "" {
				r.set(bd, rukpakv1alpha1.TypePivotPending, metav1.ConditionTrue, rukpakv1alpha1.ReasonAwaitingApproval, "waiting")
			}
			b := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "bd-new"}}
			held, err := r.holdPivot(context.Background(), bd, b, nil)
			if err != nil || held != nil {
				t.Fatalf("holdPivot = %v, %v; want nil, nil", held, err)
			}
			if c := conditions.Get(bd.Status.Conditions, rukpakv1alpha1.TypePivotPending); c != nil || bd.Status.PendingBundle != "" {
				t.Fatalf("PivotPending %+v, pendingBundle %q; want neither", c, bd.Status.PendingBundle)
			}
			var got string
			select {
			case got = <-rec.Events:
			default:
			}
			if got != tc.wantEvent {
				t.Fatalf("event %q, want %q", got, tc.wantEvent)
			}
		})
	}
}

func TestPreviewStale(t *testing.T) {
	const gen = 3
	for _, tc := range []struct {
		name      string
		noCond    bool
		condGen   int64
		pending   string
		requested string
		handled   string
		wantStale bool
	}{
		{name: "fresh", condGen: gen, pending: "bd-new"},
		{name: "no condition yet", noCond: true, pending: "bd-new", wantStale: true},
		{name: "another target", condGen: gen, pending: "bd-older", wantStale: true},
		{name: "a new generation", condGen: gen - 1, pending: "bd-new", wantStale: true},
		{name: "a reconcile request", condGen: gen, pending: "bd-new", requested: "now", handled: "before", wantStale: true},
		{name: "a handled reconcile request", condGen: gen, pending: "bd-new", requested: "now", handled: "now"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bd := &rukpakv1alpha1.BundleDeployment{
				ObjectMeta: metav1.ObjectMeta{Name: "bd", Generation: gen, Annotations: map[string]string{}},
				Status:     rukpakv1alpha1.BundleDeploymentStatus{PendingBundle: tc.pending, LastHandledReconcileAt: tc.handled},
			}
			if tc.requested != "" {
				bd.Annotations[rukpakv1alpha1.AnnotationReconcileRequestedAt] = tc.requested
			}
			if !tc.noCond {
				conditions.Set(&bd.Status.Conditions, tc.condGen, rukpakv1alpha1.TypePivotPending, metav1.ConditionTrue, rukpakv1alpha1.ReasonAwaitingApproval, "waiting")
			}
			b := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "bd-new"}}
			if got := (&Reconciler{}).previewStale(bd, b); got != tc.wantStale {
				t.Fatalf("previewStale = %v, want %v", got, tc.wantStale)
			}
		})
	}
}
