package bundledeployment

import (
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

func TestRequeueBy(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		res  ctrl.Result
		at   time.Time
		want time.Duration
	}{
		{"nothing due", ctrl.Result{}, time.Time{}, 0},
		{"nothing due keeps a health recheck", ctrl.Result{RequeueAfter: healthRecheck}, time.Time{}, healthRecheck},
		{"renewal later than the health recheck", ctrl.Result{RequeueAfter: healthRecheck}, now.Add(time.Hour), healthRecheck},
		{"renewal sooner than the health recheck", ctrl.Result{RequeueAfter: healthRecheck}, now.Add(10 * time.Second), 11 * time.Second},
		{"renewal only", ctrl.Result{}, now.Add(90 * 24 * time.Hour), 90*24*time.Hour + time.Second},
		{"renewal overdue", ctrl.Result{}, now.Add(-time.Minute), time.Second},
	} {
		if got := requeueBy(tc.res, tc.at, now).RequeueAfter; got != tc.want {
			t.Errorf("%s: requeue after %s, want %s", tc.name, got, tc.want)
		}
	}
}
