package bundledeployment

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// unhealthy lists installed objects that are missing or not ready (see
// package health), each with the reason its status gives, sorted; what is
// the same without the pods' details (recheck backoff).
func (r *Reconciler) unhealthy(ctx context.Context, owner string, objs []*unstructured.Unstructured) (bad, whats []string, err error) {
	// Right after an install, the objects of kinds with a status have no
	// verdict yet.
	r.tracker.judgeInBulk(ctx, owner, objs)
	for _, want := range objs {
		m, err := r.tracker.peek(ctx, want)
		if apierrors.IsNotFound(err) {
			// The cache may not have an object applied a moment ago yet:
			// the API server says whether it exists.
			m, err = nil, nil
		}
		var o observation
		if err == nil {
			o, err = r.tracker.Observe(ctx, owner, want, m)
		}
		if err != nil {
			if apierrors.IsNotFound(err) {
				bad = append(bad, describe(want)+": not found")
				whats = append(whats, bad[len(bad)-1])
				continue
			}
			return nil, nil, fmt.Errorf("reading %s: %w", describe(want), err)
		}
		bad, whats = r.noteHealth(ctx, owner, want, o, bad, whats)
	}
	sort.Strings(bad)
	sort.Strings(whats)
	return bad, whats, nil
}

// noteHealth adds want's verdict o to bad (with why its pods are not ready,
// once owner has been unhealthy for a while: rechecks.explain) and whats
// (without: what a recheck compares) when it is not ready.
func (r *Reconciler) noteHealth(ctx context.Context, owner string, want *unstructured.Unstructured, o observation, bad, whats []string) ([]string, []string) {
	h := o.health()
	if h.Ready {
		return bad, whats
	}
	msg := describe(want) + ": " + h.String()
	whats = append(whats, msg)
	if !r.rechecks.explain(owner) {
		return append(bad, msg), whats
	}
	if why := r.podReason(ctx, want); why != "" {
		msg += " (" + why + ")"
	}
	return append(bad, msg), whats
}
