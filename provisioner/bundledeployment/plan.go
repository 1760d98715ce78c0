package bundledeployment

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// PlanPivot says what installing objs, a Bundle's objects for bd (as
// Objects gives them), would change in bd's release now, with server-side
// dry runs: the preview a pivot shows, and rukpakctl diff prints.
func PlanPivot(ctx context.Context, releases *release.Manager, bd *rukpakv1alpha1.BundleDeployment, objs []*unstructured.Unstructured) (*release.Plan, error) {
	if err := placeObjects(objs, bd); err != nil {
		return nil, err
	}
	return releases.Plan(ctx, bd.Name, objs, ownerStamper(bd))
}
