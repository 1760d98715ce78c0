package crdupgrade

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Preflight checks the CRDs among a bundle's objects against the cluster
// before anything of the bundle is applied.
type Preflight struct {
	// CRDs reads the CRDs on the cluster. An uncached reader: a cache of
	// every CRD would hold megabytes of schemas for the rare upgrade.
	CRDs client.Reader
	// Objects lists custom resources (the dynamic client).
	Objects Lister
	Options Options
}

// Run compares every CRD in objs that is already on the cluster and
// differs from it, and returns the reports of those with changes.
func (p *Preflight) Run(ctx context.Context, objs []*unstructured.Unstructured) ([]*Report, error) {
	var reports []*Report
	for _, o := range objs {
		if o.GroupVersionKind() != apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition") {
			continue
		}
		// The live CRD first: a new one has nothing to compare with, and
		// converting its schema to the typed form costs several times its
		// size.
		live := &apiextensionsv1.CustomResourceDefinition{}
		if err := p.CRDs.Get(ctx, client.ObjectKey{Name: o.GetName()}, live); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("reading CRD %s: %w", o.GetName(), err)
		}
		next := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, next); err != nil {
			return nil, fmt.Errorf("decoding CRD %s: %w", o.GetName(), err)
		}
		// As the API server stores it, so only real changes show.
		apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(next)
		r, err := Compare(ctx, p.Objects, live, next, p.Options)
		if err != nil {
			return nil, err
		}
		if len(r.Findings) > 0 {
			reports = append(reports, r)
		}
	}
	return reports, nil
}

// DynamicLister lists custom resources with a dynamic client, across all
// namespaces.
type DynamicLister struct{ Client dynamic.Interface }

// List lists one page of gvr.
func (d DynamicLister) List(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return d.Client.Resource(gvr).List(ctx, opts)
}
