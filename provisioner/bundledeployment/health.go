package bundledeployment

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rukpak-dev/rukpak/provisioner/health"
)

// unhealthy lists installed objects that are missing or not ready (see
// package health), each with the reason its status gives, sorted.
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
		if res := health.Check(live); !res.Ready {
			msg := describe(want) + ": " + res.String()
			if why := r.podReason(ctx, live); why != "" {
				msg += " (" + why + ")"
			}
			bad = append(bad, msg)
		}
	}
	sort.Strings(bad)
	return bad, nil
}
