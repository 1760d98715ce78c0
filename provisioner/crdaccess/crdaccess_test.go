package crdaccess

import (
	"reflect"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
)

func TestRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		crds  []string
		rules []rbacv1.PolicyRule
	}{
		{"none", nil, nil},
		{"one group, sorted, duplicates once", []string{"widgets.example.com", "gadgets.example.com", "widgets.example.com"},
			[]rbacv1.PolicyRule{{APIGroups: []string{"example.com"}, Resources: []string{"gadgets", "widgets"}, Verbs: []string{"list"}}}},
		{"a rule per group, in order", []string{"prometheuses.monitoring.coreos.com", "certificates.cert-manager.io", "alertmanagers.monitoring.coreos.com"},
			[]rbacv1.PolicyRule{
				{APIGroups: []string{"cert-manager.io"}, Resources: []string{"certificates"}, Verbs: []string{"list"}},
				{APIGroups: []string{"monitoring.coreos.com"}, Resources: []string{"alertmanagers", "prometheuses"}, Verbs: []string{"list"}},
			}},
		// The API server refuses such names; nothing is granted for them.
		{"names that are no PLURAL.GROUP", []string{"nodot", ".example.com", "widgets."}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Rules(tc.crds); !reflect.DeepEqual(got, tc.rules) {
				t.Errorf("Rules(%q) = %+v, want %+v", tc.crds, got, tc.rules)
			}
		})
	}
}

func TestPacerSpacesReconciles(t *testing.T) {
	var p pacer
	t0 := time.Unix(1000, 0)
	if d := p.delay(t0); d != settle {
		t.Errorf("before any reconcile: %v, want settle (%v)", d, settle)
	}
	p.started(t0)
	for _, c := range []struct {
		after, want time.Duration
	}{
		{0, pace},
		{time.Second, pace - time.Second},
		{pace - settle/2, settle},
		{pace, settle},
		{time.Hour, settle},
	} {
		if d := p.delay(t0.Add(c.after)); d != c.want {
			t.Errorf("%v after a reconcile started: %v, want %v", c.after, d, c.want)
		}
	}
}
