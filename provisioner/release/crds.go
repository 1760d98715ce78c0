package release

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Helm's ownership metadata: an existing object carrying it for this release
// is adopted by an install instead of failing it.
const (
	helmReleaseName      = "meta.helm.sh/release-name"
	helmReleaseNamespace = "meta.helm.sh/release-namespace"
	helmManagedBy        = "app.kubernetes.io/managed-by"
)

// crdEstablishTimeout bounds the wait for a bundle's own CRDs.
const crdEstablishTimeout = time.Minute

// waitEstablished waits until every CRD in crds serves its kind, then drops
// cached discovery so the kinds they define can be mapped.
func (m *Manager) waitEstablished(ctx context.Context, crds []*unstructured.Unstructured) error {
	for _, crd := range crds {
		name := crd.GetName()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, crdEstablishTimeout, true, func(ctx context.Context) (bool, error) {
			live := &apiextensionsv1.CustomResourceDefinition{}
			if err := m.client.Get(ctx, client.ObjectKey{Name: name}, live); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			for _, c := range live.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", name, err)
		}
	}
	if len(crds) > 0 {
		m.getter.Reset()
	}
	return nil
}
