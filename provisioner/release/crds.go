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

// preinstallCRDs applies the CRDs among objs (server-side, with Helm's
// ownership metadata for release name) and waits for them to be
// established. Helm maps every object of a release to a REST resource before
// creating any, so a bundle that ships a CRD together with custom resources
// of that CRD could otherwise never install; Helm charts avoid this with a
// crds/ directory, which Helm never upgrades. Pre-installed CRDs stay part of
// the release: upgraded and uninstalled with it.
func (m *Manager) preinstallCRDs(ctx context.Context, name string, objs []*unstructured.Unstructured, mutate func(*unstructured.Unstructured)) error {
	var crds []*unstructured.Unstructured
	for _, o := range objs {
		if o.GroupVersionKind().GroupKind() == apiextensionsv1.Kind("CustomResourceDefinition") {
			crds = append(crds, o)
		}
	}
	if len(crds) == 0 {
		return nil
	}
	for _, crd := range crds {
		crd = crd.DeepCopy()
		if mutate != nil {
			mutate(crd)
		}
		labels := crd.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[helmManagedBy] = "Helm"
		crd.SetLabels(labels)
		ann := crd.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[helmReleaseName] = name
		ann[helmReleaseNamespace] = m.namespace
		crd.SetAnnotations(ann)

		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(crd.GroupVersionKind())
		err := m.client.Get(ctx, client.ObjectKeyFromObject(crd), existing)
		if err == nil && existing.GetAnnotations()[helmReleaseName] != name {
			// Someone else's CRD: leave the conflict to Helm, which reports
			// it clearly.
			continue
		}
		if err := m.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(crd), client.FieldOwner("rukpak-crds"), client.ForceOwnership); err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.GetName(), err)
		}
	}
	for _, crd := range crds {
		if err := m.waitEstablished(ctx, crd.GetName()); err != nil {
			return err
		}
	}
	m.getter.Reset()
	return nil
}

func (m *Manager) waitEstablished(ctx context.Context, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, crdEstablishTimeout, true, func(ctx context.Context) (bool, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := m.client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for CRD %s to be established: %w", name, err)
	}
	return nil
}
