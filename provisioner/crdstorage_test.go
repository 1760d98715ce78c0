package provisioner_test

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// waitCRDStorage waits until the API server lists the custom resources of
// each CRD named from its watch cache. The API server's cleanup of a
// deleted CRD lists its instances that way, and while the CRD's storage
// initialises it fails ("could not list instances: storage is
// (re)initializing") and retries with a backoff that, on a loaded machine,
// grows past minutes: tests that uninstall CRDs they just installed wait
// for this first, so the deletion they check is the provisioner's and not
// the API server's retry. (A list with a limit would be served from etcd
// whatever the cache's state, so this one has none.)
func (h *harness) waitCRDStorage(names ...string) {
	h.t.Helper()
	ctx := context.Background()
	eventually(h.t, fmt.Sprintf("the storage of %d CRDs initialised", len(names)), func() error {
		for _, name := range names {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := h.c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return err
			}
			version := ""
			for _, v := range crd.Spec.Versions {
				if v.Storage {
					version = v.Name
				}
			}
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.ListKind})
			if err := h.c.List(ctx, list); err != nil {
				return fmt.Errorf("listing the %s of CRD %s: %w", crd.Spec.Names.Plural, name, err)
			}
		}
		return nil
	})
}
