package provisioner

import (
	"context"
	"io/fs"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/servingcert"
)

// DeploymentObjects returns the objects bd installs from stored content
// fsys (what HandlerFor's handler returns), exactly as the provisioner
// decides them, reading the cluster with reader where the content alone
// cannot tell (an install namespace that exists already). rukpakctl diff
// plans with it.
func DeploymentObjects(ctx context.Context, reader client.Reader, fsys fs.FS, bd *rukpakv1alpha1.BundleDeployment) ([]*unstructured.Unstructured, error) {
	return (&objects{reader: reader}).forDeployment(ctx, fsys, bd)
}

// PrepareObjects completes objs as an install completes them before
// applying them (serving certificates kept from the live Secrets or issued
// in memory, CA bundles filled in), reading the cluster with reader and
// writing nothing; namespace is the provisioner's. Certificates are judged
// due with the default validity and renewal times. rukpakctl diff plans
// with it.
func PrepareObjects(ctx context.Context, reader client.Reader, namespace string, bd *rukpakv1alpha1.BundleDeployment, objs []*unstructured.Unstructured) error {
	_, err := prepareObjects(&servingcert.Issuer{Reader: reader}, namespace)(ctx, bd, objs)
	return err
}
