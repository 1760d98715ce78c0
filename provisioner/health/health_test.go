package health

import (
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func conds(c ...map[string]any) []any {
	out := make([]any, len(c))
	for i := range c {
		out[i] = c[i]
	}
	return out
}

func cond(typ, status, reason, msg string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg}
}

func TestCheck(t *testing.T) {
	// deploy is a Deployment as the deployment controller reports it.
	deploy := func(gen, observed, replicas, updated, available int64, availableCond string) map[string]any {
		return map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "d", "generation": gen},
			"spec":     map[string]any{"replicas": replicas, "progressDeadlineSeconds": int64(600)},
			"status": map[string]any{
				"observedGeneration": observed, "replicas": replicas, "updatedReplicas": updated,
				"readyReplicas": available, "availableReplicas": available,
				"conditions": conds(cond("Available", availableCond, "", ""),
					cond("Progressing", "True", "NewReplicaSetAvailable", "")),
			},
		}
	}
	crd := func(established, reason, msg string) map[string]any {
		return map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": "x"},
			"status":   map[string]any{"conditions": conds(cond("Established", established, reason, msg))},
		}
	}
	sts := func(replicas, ready int64) map[string]any {
		return map[string]any{
			"apiVersion": "apps/v1", "kind": "StatefulSet",
			"metadata": map[string]any{"name": "s", "generation": int64(1)},
			"spec":     map[string]any{"replicas": replicas},
			"status": map[string]any{"observedGeneration": int64(1), "replicas": replicas, "readyReplicas": ready,
				"currentReplicas": replicas, "updatedReplicas": replicas, "currentRevision": "r1", "updateRevision": "r1"},
		}
	}
	ds := func(desired, available int64) map[string]any {
		return map[string]any{
			"apiVersion": "apps/v1", "kind": "DaemonSet",
			"metadata": map[string]any{"name": "ds", "generation": int64(1)},
			"status": map[string]any{"observedGeneration": int64(1), "desiredNumberScheduled": desired,
				"currentNumberScheduled": desired, "updatedNumberScheduled": desired, "numberAvailable": available, "numberReady": available},
		}
	}
	apiService := func(c ...map[string]any) map[string]any {
		return map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"metadata": map[string]any{"name": "v1.example.com"},
			"status":   map[string]any{"conditions": conds(c...)},
		}
	}
	widget := func(gen, observed int64, c ...map[string]any) map[string]any {
		return map[string]any{
			"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "w", "namespace": "ns", "generation": gen},
			"status":   map[string]any{"observedGeneration": observed, "conditions": conds(c...)},
		}
	}
	tests := []struct {
		name string
		obj  map[string]any
		want string // "" when ready
	}{
		{"available deployment", deploy(2, 2, 3, 3, 3, "True"), ""},
		{"rollout not observed", deploy(3, 2, 3, 3, 3, "True"), "LatestGenerationNotObserved: Deployment generation is 3, but latest observed generation is 2"},
		{"unavailable deployment", deploy(1, 1, 1, 1, 1, "False"), "DeploymentNotAvailable: Deployment not Available"},
		{"rolling out", deploy(1, 1, 3, 1, 3, "True"), "LessUpdated: Updated: 1/3"},
		{"deployment too few available", deploy(1, 1, 3, 3, 1, "True"), "LessAvailable: Available: 1/3"},
		{"deployment without status", map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "d", "generation": int64(1)}},
			"LessReplicas: Replicas: 0/1"},
		{"ready statefulset", sts(2, 2), ""},
		{"statefulset short", sts(3, 1), "LessReady: Ready: 1/3"},
		{"ready daemonset", ds(3, 3), ""},
		{"daemonset short", ds(3, 1), "LessAvailable: Available: 1/3"},
		{"established CRD", crd("True", "InitialNamesAccepted", "the initial names have been accepted"), ""},
		{"CRD installing", crd("False", "Installing", "the initial names have been accepted"), "Installing: Install in progress"},
		{"CRD not established", crd("False", "NotEstablished", "names conflict"), "NotEstablished: names conflict"},
		{"available APIService", apiService(cond("Available", "True", "Passed", "all checks passed")), ""},
		{"unavailable APIService", apiService(cond("Available", "False", "MissingEndpoints", "endpoints for service/x in \"ns\" have no addresses")),
			`MissingEndpoints: endpoints for service/x in "ns" have no addresses`},
		{"APIService without status", apiService(), "NotAvailable"},
		{"ConfigMap", map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"}}, ""},
		{"pending pod", map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p"}, "status": map[string]any{"phase": "Pending"}},
			"PodPending: Pod is in the Pending phase"},
		{"ready pod", map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p"},
			"status": map[string]any{"phase": "Running", "conditions": conds(cond("Ready", "True", "", ""))}}, ""},
		{"succeeded pod", map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p"}, "status": map[string]any{"phase": "Succeeded"}}, ""},
		{"custom resource Ready=False", widget(1, 1, cond("Ready", "False", "DatabaseDown", "cannot reach db")), "DatabaseDown: cannot reach db"},
		{"custom resource Ready=True", widget(1, 1, cond("Ready", "True", "Ok", "")), ""},
		{"custom resource generation not observed", widget(2, 1, cond("Ready", "True", "Ok", "")),
			"LatestGenerationNotObserved: Widget generation is 2, but latest observed generation is 1"},
		{"custom resource stalled", widget(1, 1, cond("Stalled", "True", "BadConfig", "spec.size must be positive")), "BadConfig: spec.size must be positive"},
		{"custom resource without conditions", widget(1, 1), ""},
		{"terminating", map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "deletionTimestamp": "2026-01-01T00:00:00Z"}},
			"Terminating: Resource scheduled for deletion"},
		{"malformed conditions", map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"},
			"status": map[string]any{"conditions": "not a list"}}, "StatusUnreadable: cannot restore slice from string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(&unstructured.Unstructured{Object: tc.obj})
			if got.Ready != (tc.want == "") || got.String() != tc.want {
				t.Errorf("Check = %+v (%q), want %q", got, got.String(), tc.want)
			}
		})
	}
}

func TestCheckBoundsMessages(t *testing.T) {
	long := strings.Repeat("é", 1000) // 2 bytes each: the cut must not split one
	got := Check(&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"},
		"status": map[string]any{"conditions": conds(cond("Ready", "False", long, long))},
	}})
	want := strings.Repeat("é", (maxMessage-3)/2) + "..."
	if got.Ready || got.Reason != want || got.Message != want {
		t.Errorf("Check = reason %d bytes, message %d bytes; want both %d bytes", len(got.Reason), len(got.Message), len(want))
	}
}

// TestStatusLess: every kind StatusLess names is judged ready by Check
// whatever its content (so the answer of a write that leaves one existing
// is its verdict), and kinds with a status are not among them.
func TestStatusLess(t *testing.T) {
	for gk := range statusLess {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": schema.GroupVersion{Group: gk.Group, Version: "v1"}.String(), "kind": gk.Kind,
			"metadata": map[string]any{"name": "x", "namespace": "ns", "generation": int64(3)},
			"data":     map[string]any{"k": "v"},
			"rules":    []any{map[string]any{"verbs": []any{"get"}}},
		}}
		if res := Check(u); !res.Ready {
			t.Errorf("%s: Check says %v; a status-less kind must be ready once it exists", gk, res)
		}
	}
	for _, gk := range []schema.GroupKind{
		{Group: "apps", Kind: "Deployment"}, {Group: "apps", Kind: "StatefulSet"}, {Group: "apps", Kind: "DaemonSet"},
		{Kind: "Service"}, {Kind: "Namespace"}, {Kind: "Pod"}, {Kind: "PersistentVolumeClaim"},
		{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}, {Group: "policy", Kind: "PodDisruptionBudget"},
		{Group: "apiregistration.k8s.io", Kind: "APIService"}, {Group: "batch", Kind: "Job"},
		{Group: "example.com", Kind: "ConfigMap"},
	} {
		if StatusLess(gk) {
			t.Errorf("%s has a status (or may), but StatusLess says it has none", gk)
		}
	}
}

// Objects of kinds whose rule reads their spec are read whole; the others
// may be judged from metadata and status alone.
func TestReadsSpec(t *testing.T) {
	for gk, want := range map[schema.GroupKind]bool{
		{Kind: "Service"}:                                                 true,
		{Kind: "Pod"}:                                                     true,
		{Kind: "PersistentVolumeClaim"}:                                   true,
		{Group: "apps", Kind: "Deployment"}:                               true,
		{Group: "apps", Kind: "StatefulSet"}:                              true,
		{Group: "apps", Kind: "DaemonSet"}:                                true,
		{Group: "batch", Kind: "Job"}:                                     true,
		{Group: "policy", Kind: "PodDisruptionBudget"}:                    true,
		{Kind: "ConfigMap"}:                                               false,
		{Kind: "Namespace"}:                                               false,
		{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: false,
		{Group: "apiregistration.k8s.io", Kind: "APIService"}:             false,
		{Group: "example.com", Kind: "Widget"}:                            false,
	} {
		if got := ReadsSpec(gk); got != want {
			t.Errorf("ReadsSpec(%s) = %v, want %v", gk, got, want)
		}
	}
	// Every kind kstatus has a rule of its own for, but those judged from
	// status alone (CRDs) or always ready, is read whole: checked against
	// kstatus as vendored, so a rule it adds for one of these shows.
	statusOnly := map[string]bool{"CustomResourceDefinition": true, "ConfigMap": true, "Secret": true, "CronJob": true}
	for _, gvk := range []schema.GroupVersionKind{
		{Version: "v1", Kind: "Service"}, {Version: "v1", Kind: "Pod"}, {Version: "v1", Kind: "PersistentVolumeClaim"},
		{Version: "v1", Kind: "ConfigMap"}, {Version: "v1", Kind: "Secret"}, {Version: "v1", Kind: "Namespace"},
		{Version: "v1", Kind: "ServiceAccount"}, {Version: "v1", Kind: "Endpoints"}, {Version: "v1", Kind: "ResourceQuota"},
		{Group: "apps", Version: "v1", Kind: "Deployment"}, {Group: "apps", Version: "v1", Kind: "StatefulSet"},
		{Group: "apps", Version: "v1", Kind: "DaemonSet"}, {Group: "apps", Version: "v1", Kind: "ReplicaSet"},
		{Group: "batch", Version: "v1", Kind: "Job"}, {Group: "batch", Version: "v1", Kind: "CronJob"},
		{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"},
		{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
		{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"},
		{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
		{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"},
	} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if status.GetLegacyConditionsFn(u) != nil && !statusOnly[gvk.Kind] && !ReadsSpec(gvk.GroupKind()) {
			t.Errorf("kstatus has a rule of its own for %s, which ReadsSpec says reads no spec", gvk.GroupKind())
		}
	}
}
