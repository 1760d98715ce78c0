package bundledeployment

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/metrics"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// correctDrift restores installed objects that were deleted or edited since
// the release was applied. An object is drifted when some field the bundle
// sets differs on the cluster; fields the bundle leaves alone (defaults,
// status, other controllers' additions) are not compared. Restoring is a
// server-side apply of the bundle's version of the object, so a false
// positive (a value the API server normalised) costs one request and no
// write.
//
// An object that another release owns now (it was deleted and someone
// else's release installed it since) is never restored: the apply would
// force this release's fields over the other's. Such objects are returned.
// Restored objects are counted in the metrics of BundleDeployment owner.
// Objects are restored with as, the identity they were installed with.
func (r *Reconciler) correctDrift(ctx context.Context, as client.Client, owner string, desired []*unstructured.Unstructured) ([]takenObject, error) {
	var restored []string
	var taken []takenObject
	defer func() { metrics.DriftCorrected(r.Class, owner, len(restored)) }()
	// After a restart: one LIST per kind rather than a GET per object.
	r.tracker.judgeInBulk(ctx, owner, desired)
	for _, want := range desired {
		live, err := r.tracker.Metadata(ctx, want)
		if err == nil {
			if owner := ownedElsewhere(want, live); owner != "" {
				taken = append(taken, takenObject{want, owner})
				continue
			}
			var o observation
			o, err = r.tracker.Observe(ctx, owner, want, live)
			if err == nil && !o.drifted {
				continue
			}
		}
		switch {
		case apierrors.IsNotFound(err):
			// The cache only holds objects labelled as installed by some
			// BundleDeployment, and may lag: ask the API server whether
			// someone else has it now before creating it again.
			m, err := r.Releases.Live(ctx, want)
			if err != nil {
				return taken, fmt.Errorf("reading %s: %w", describe(want), err)
			}
			if m != nil {
				if owner := ownedElsewhere(want, m); owner != "" {
					taken = append(taken, takenObject{want, owner})
					continue
				}
			}
		case err != nil:
			return taken, fmt.Errorf("reading %s: %w", describe(want), err)
		}
		at, err := release.ApplyObjectAt(ctx, as, want)
		if err != nil {
			return taken, fmt.Errorf("restoring %s: %w", describe(want), err)
		}
		r.tracker.restored(owner, want, at)
		restored = append(restored, describe(want))
	}
	if len(restored) > 0 {
		log.FromContext(ctx).Info("restored drifted objects", "objects", restored)
	}
	if len(taken) > 0 {
		log.FromContext(ctx).Info("not restoring objects another release owns now", "objects", len(taken))
	}
	return taken, nil
}

// takenObject is an object of the release that owner has now.
type takenObject struct {
	obj   *unstructured.Unstructured
	owner string
}

// ownedElsewhere names the owner of live if that is not want's: another
// Helm release by its ownership annotations, or another BundleDeployment by
// its owner label. An object with neither belongs to no one else.
func ownedElsewhere(want *unstructured.Unstructured, live metav1.Object) string {
	if ns, name := release.Owner(live); name != "" {
		if wantNS, wantName := release.Owner(want); ns != wantNS || name != wantName {
			return fmt.Sprintf("release %s/%s", ns, name)
		}
	}
	if l := live.GetLabels(); l[rukpakv1alpha1.LabelOwnerKind] == "BundleDeployment" {
		if owner := l[rukpakv1alpha1.LabelOwnerName]; owner != "" && owner != want.GetLabels()[rukpakv1alpha1.LabelOwnerName] {
			return fmt.Sprintf("bundle deployment %s", owner)
		}
	}
	return ""
}

// ownedElsewhereMessage is the Installed condition of a BundleDeployment
// whose objects another release owns now.
func ownedElsewhereMessage(taken []takenObject) string {
	const shown = 10
	parts := make([]string, 0, min(len(taken), shown))
	for _, t := range taken[:min(len(taken), shown)] {
		parts = append(parts, fmt.Sprintf("%s is owned by %s", describe(t.obj), t.owner))
	}
	msg := strings.Join(parts, "; ")
	if len(taken) > shown {
		msg += fmt.Sprintf("; and %d more", len(taken)-shown)
	}
	return "Not taking back objects that another release owns now (delete them or remove them from one of the bundles): " + msg
}

// without returns objs minus the taken ones (the same pointers).
func without(objs []*unstructured.Unstructured, taken []takenObject) []*unstructured.Unstructured {
	skip := make(map[*unstructured.Unstructured]bool, len(taken))
	for _, t := range taken {
		skip[t.obj] = true
	}
	kept := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if !skip[o] {
			kept = append(kept, o)
		}
	}
	return kept
}

func drifted(want, live *unstructured.Unstructured) bool {
	return driftedFrom(want, live, false)
}

// driftedFrom is drifted, where asApplied says live's fields other than
// metadata and status are known to be as want's (its apply left them so,
// and its generation has not moved since): only the metadata is compared.
func driftedFrom(want, live *unstructured.Unstructured, asApplied bool) bool {
	for k, v := range want.Object {
		switch {
		case k == "metadata":
			if !subset(want.GetLabels(), live.GetLabels()) || !subset(want.GetAnnotations(), live.GetAnnotations()) {
				return true
			}
		case k == "status" || k == "apiVersion" || k == "kind" || asApplied:
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
// across their spellings ("1000m" and "1") and the API server's rounding.
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
		if errA != nil || errB != nil {
			return false
		}
		// The API server rounds resource lists up to thousandths
		// ("100n" is stored as "1m").
		qa.RoundUp(resource.Milli)
		return qa.Cmp(qb) == 0
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
