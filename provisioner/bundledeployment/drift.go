package bundledeployment

import (
	"context"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// correctDrift restores installed objects that were deleted or edited since
// the release was applied. An object is drifted when some field the bundle
// sets differs on the cluster; fields the bundle leaves alone (defaults,
// status, other controllers' additions) are not compared. Restoring is a
// server-side apply of the bundle's version of the object, so a false
// positive (a value the API server normalised) costs one request and no
// write.
func (r *Reconciler) correctDrift(ctx context.Context, desired []*unstructured.Unstructured) ([]string, error) {
	var restored []string
	for _, want := range desired {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(want.GroupVersionKind())
		live.SetName(want.GetName())
		live.SetNamespace(want.GetNamespace())
		err := r.tracker.Get(ctx, live)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return restored, fmt.Errorf("reading %s: %w", describe(want), err)
		case !drifted(want, live):
			continue
		}
		if err := release.ApplyObject(ctx, r.Client, want); err != nil {
			return restored, fmt.Errorf("restoring %s: %w", describe(want), err)
		}
		restored = append(restored, describe(want))
	}
	if len(restored) > 0 {
		log.FromContext(ctx).Info("restored drifted objects", "objects", restored)
	}
	return restored, nil
}

func drifted(want, live *unstructured.Unstructured) bool {
	for k, v := range want.Object {
		switch k {
		case "metadata":
			if !subset(want.GetLabels(), live.GetLabels()) || !subset(want.GetAnnotations(), live.GetAnnotations()) {
				return true
			}
		case "status", "apiVersion", "kind":
		default:
			if !subset(v, live.Object[k]) {
				return true
			}
		}
	}
	return false
}

// subset reports whether every value set in want is the same in got.
func subset(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return len(w) == 0 && got == nil
		}
		for k, v := range w {
			if !subset(v, g[k]) {
				return false
			}
		}
		return true
	case map[string]string:
		g, _ := got.(map[string]string)
		for k, v := range w {
			if g[k] != v {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return len(w) == 0 && (got == nil || ok)
		}
		for i := range w {
			if !subset(w[i], g[i]) {
				return false
			}
		}
		return true
	case nil:
		return true
	default:
		if reflect.DeepEqual(want, got) {
			return true
		}
		if got == nil {
			// The API server drops zero values of omitempty fields.
			return reflect.ValueOf(want).IsZero()
		}
		return sameScalar(want, got)
	}
}

// sameScalar compares numbers across int64/float64 and resource quantities
// across their spellings ("1000m" and "1").
func sameScalar(a, b any) bool {
	if fa, ok := number(a); ok {
		if fb, ok := number(b); ok {
			return fa == fb
		}
	}
	sa, okA := a.(string)
	sb, okB := b.(string)
	if okA && okB {
		qa, errA := resource.ParseQuantity(sa)
		qb, errB := resource.ParseQuantity(sb)
		return errA == nil && errB == nil && qa.Cmp(qb) == 0
	}
	return false
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

func describe(o *unstructured.Unstructured) string {
	if ns := o.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", o.GetKind(), ns, o.GetName())
	}
	return fmt.Sprintf("%s %s", o.GetKind(), o.GetName())
}
