package bundledeployment

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func obj(m map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: m} }

func TestDrifted(t *testing.T) {
	want := obj(map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "d", "labels": map[string]any{"app": "x"}},
		"spec": map[string]any{
			"replicas":        int64(2),
			"paused":          false,
			"minReadySeconds": int64(0),
			"selector":        map[string]any{},
			"template": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "c", "image": "img:1", "resources": map[string]any{"limits": map[string]any{"cpu": "1000m"}}},
			}}},
		},
	})
	live := func(mutate func(m map[string]any)) *unstructured.Unstructured {
		u := want.DeepCopy()
		// What the API server adds: defaults, status, other metadata.
		u.Object["status"] = map[string]any{"replicas": int64(2)}
		spec := u.Object["spec"].(map[string]any)
		spec["strategy"] = map[string]any{"type": "RollingUpdate"}
		c := spec["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		c["imagePullPolicy"] = "IfNotPresent"
		c["resources"] = map[string]any{"limits": map[string]any{"cpu": "1"}}
		md := u.Object["metadata"].(map[string]any)
		md["resourceVersion"] = "42"
		md["labels"] = map[string]any{"app": "x", "added-by": "someone"}
		if mutate != nil {
			mutate(u.Object)
		}
		return u
	}
	tests := []struct {
		name   string
		mutate func(m map[string]any)
		want   bool
	}{
		{name: "only server defaults and normalised quantities", want: false},
		{name: "replicas float from JSON", mutate: func(m map[string]any) { m["spec"].(map[string]any)["replicas"] = float64(2) }, want: false},
		{name: "replicas changed", mutate: func(m map[string]any) { m["spec"].(map[string]any)["replicas"] = int64(3) }, want: true},
		{name: "image changed", mutate: func(m map[string]any) {
			m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"] = "img:2"
		}, want: true},
		{name: "container added", mutate: func(m map[string]any) {
			ts := m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			ts["containers"] = append(ts["containers"].([]any), map[string]any{"name": "sidecar"})
		}, want: true},
		{name: "label removed", mutate: func(m map[string]any) { m["metadata"].(map[string]any)["labels"] = map[string]any{} }, want: true},
		{name: "spec removed", mutate: func(m map[string]any) { delete(m, "spec") }, want: true},
		{name: "zero values the server dropped", mutate: func(m map[string]any) {
			delete(m["spec"].(map[string]any), "paused")
			delete(m["spec"].(map[string]any), "minReadySeconds")
			delete(m["spec"].(map[string]any), "selector")
		}, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := drifted(want, live(tc.mutate)); got != tc.want {
				t.Errorf("drifted = %v, want %v", got, tc.want)
			}
		})
	}
}
