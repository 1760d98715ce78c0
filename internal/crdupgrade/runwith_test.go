package crdupgrade

import (
	"context"
	"errors"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// A CRD that Same finds the live one already holds passes without being
// read whole or compared, and is remembered as passed; when Same fails,
// the CRD is compared as before.
func TestRunWithSame(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	live := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}},
		},
	}
	wholeReads := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(live).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, whole := obj.(*apiextensionsv1.CustomResourceDefinition); whole {
				wholeReads++
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	stored := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: live.Name}, stored); err != nil {
		t.Fatal(err)
	}
	wholeReads = 0
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		t.Fatal(err)
	}
	next := &unstructured.Unstructured{Object: raw}
	next.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))

	compared := 0
	newPreflight := func() *Preflight {
		return &Preflight{CRDs: c, Objects: nil, Digest: func(*unstructured.Unstructured) [32]byte { return [32]byte{1} }, Compared: func() { compared++ }}
	}

	p := newPreflight()
	same := func(context.Context, []*unstructured.Unstructured) (map[string]string, error) {
		return map[string]string{live.Name: stored.ResourceVersion}, nil
	}
	if _, err := p.RunWith(ctx, []*unstructured.Unstructured{next}, RunOptions{Same: same}); err != nil {
		t.Fatal(err)
	}
	if wholeReads != 0 || compared != 0 {
		t.Errorf("a CRD the live one holds: %d whole reads, %d comparisons; want none", wholeReads, compared)
	}
	// Remembered: passes again without Same.
	if _, err := p.Run(ctx, []*unstructured.Unstructured{next}); err != nil {
		t.Fatal(err)
	}
	if wholeReads != 0 || compared != 0 {
		t.Errorf("again: %d whole reads, %d comparisons; want none", wholeReads, compared)
	}

	p = newPreflight()
	failing := func(context.Context, []*unstructured.Unstructured) (map[string]string, error) {
		return nil, errors.New("list failed")
	}
	if _, err := p.RunWith(ctx, []*unstructured.Unstructured{next}, RunOptions{Same: failing}); err != nil {
		t.Fatal(err)
	}
	if wholeReads != 1 || compared != 1 {
		t.Errorf("Same failing: %d whole reads, %d comparisons; want one each", wholeReads, compared)
	}
}
