package provisioner

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/servingcert"
)

// prepareObjects completes a BundleDeployment's objects before they are
// applied: its admission webhooks never see namespace (the provisioner's,
// where it records releases), so a failing webhook of one operator cannot
// block the installs of others; and certificate Secrets and CA bundles
// are filled by issuer.
func prepareObjects(issuer *servingcert.Issuer, namespace string) func(context.Context, *rukpakv1alpha1.BundleDeployment, []*unstructured.Unstructured) (time.Time, error) {
	return func(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, objs []*unstructured.Unstructured) (time.Time, error) {
		if err := servingcert.ExcludeNamespace(objs, namespace); err != nil {
			return time.Time{}, err
		}
		return issuer.Prepare(ctx, bd.Name, objs)
	}
}
