package bundledeployment

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// unhealthy lists installed objects that are missing or not ready, judged
// kstatus-style from their status: workloads must have rolled out and be
// available, CRDs established, APIServices available. Kinds without a
// readiness notion are healthy once they exist.
func (r *Reconciler) unhealthy(ctx context.Context, objs []*unstructured.Unstructured) ([]string, error) {
	var bad []string
	for _, want := range objs {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(want.GroupVersionKind())
		live.SetName(want.GetName())
		live.SetNamespace(want.GetNamespace())
		if err := r.tracker.Get(ctx, live); err != nil {
			if apierrors.IsNotFound(err) {
				bad = append(bad, describe(want)+": not found")
				continue
			}
			return nil, fmt.Errorf("reading %s: %w", describe(want), err)
		}
		if why := notReady(live); why != "" {
			bad = append(bad, describe(want)+": "+why)
		}
	}
	sort.Strings(bad)
	return bad, nil
}

func notReady(u *unstructured.Unstructured) string {
	gen := u.GetGeneration()
	observed, found, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	stale := found && observed < gen
	gk := u.GroupVersionKind().GroupKind()
	switch gk.String() {
	case "Deployment.apps":
		if stale {
			return "rollout not observed yet"
		}
		if c := condition(u, "Available"); c != "True" {
			return "not available"
		}
		return replicasReady(u, "updatedReplicas", "availableReplicas")
	case "StatefulSet.apps":
		if stale {
			return "rollout not observed yet"
		}
		return replicasReady(u, "readyReplicas", "updatedReplicas")
	case "DaemonSet.apps":
		if stale {
			return "rollout not observed yet"
		}
		want, _, _ := unstructured.NestedInt64(u.Object, "status", "desiredNumberScheduled")
		ready, _, _ := unstructured.NestedInt64(u.Object, "status", "numberAvailable")
		if ready < want {
			return fmt.Sprintf("%d of %d pods available", ready, want)
		}
	case "CustomResourceDefinition.apiextensions.k8s.io":
		if condition(u, "Established") != "True" {
			return "not established"
		}
	case "APIService.apiregistration.k8s.io":
		if condition(u, "Available") != "True" {
			return "not available"
		}
	case "Pod":
		if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase != "Running" && phase != "Succeeded" {
			return "phase " + strings.ToLower(phase)
		}
	}
	return ""
}

func replicasReady(u *unstructured.Unstructured, fields ...string) string {
	want, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if !found {
		want = 1
	}
	for _, f := range fields {
		got, _, _ := unstructured.NestedInt64(u.Object, "status", f)
		if got < want {
			return fmt.Sprintf("%d of %d replicas %s", got, want, strings.TrimSuffix(f, "Replicas"))
		}
	}
	return ""
}

func condition(u *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}
