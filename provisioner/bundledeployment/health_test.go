package bundledeployment

import "testing"

func TestNotReady(t *testing.T) {
	deploy := func(gen, observed, replicas, updated, available int64, availableCond string) map[string]any {
		return map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "d", "generation": gen},
			"spec":     map[string]any{"replicas": replicas},
			"status": map[string]any{
				"observedGeneration": observed, "updatedReplicas": updated, "availableReplicas": available,
				"conditions": []any{map[string]any{"type": "Available", "status": availableCond}},
			},
		}
	}
	crd := func(established string) map[string]any {
		return map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": "x"},
			"status":   map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": established}}},
		}
	}
	tests := []struct {
		name string
		obj  map[string]any
		want string
	}{
		{"available deployment", deploy(2, 2, 3, 3, 3, "True"), ""},
		{"rollout not observed", deploy(3, 2, 3, 3, 3, "True"), "rollout not observed yet"},
		{"unavailable deployment", deploy(1, 1, 1, 1, 0, "False"), "not available"},
		{"rolling out", deploy(1, 1, 3, 1, 3, "True"), "1 of 3 replicas updated"},
		{"established CRD", crd("True"), ""},
		{"CRD not established", crd("False"), "not established"},
		{"ConfigMap", map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"}}, ""},
		{"pending pod", map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p"}, "status": map[string]any{"phase": "Pending"}}, "phase pending"},
		{"daemonset short", map[string]any{"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": map[string]any{"name": "ds"},
			"status": map[string]any{"desiredNumberScheduled": int64(3), "numberAvailable": int64(1)}}, "1 of 3 pods available"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := notReady(obj(tc.obj)); got != tc.want {
				t.Errorf("notReady = %q, want %q", got, tc.want)
			}
		})
	}
}
