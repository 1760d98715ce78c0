package install

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// placeIn puts namespaced objects without a namespace into the release's,
// kinds of the chart's own CRDs (not served yet) by their scope.
func TestPlaceIn(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot)
	obj := func(doc string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		return u
	}
	crds := []*unstructured.Unstructured{
		obj(`{apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {name: gadgets.x.io}, spec: {group: x.io, scope: Namespaced, names: {kind: Gadget}}}`),
		obj(`{apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {name: clusters.x.io}, spec: {group: x.io, scope: Cluster, names: {kind: Cluster}}}`),
	}
	for _, tc := range []struct {
		doc, want string
	}{
		{`{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}`, "apps"},
		{`{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: other}}`, "other"},
		{`{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: a}}`, ""},
		{`{apiVersion: x.io/v1, kind: Gadget, metadata: {name: a}}`, "apps"},
		{`{apiVersion: x.io/v1, kind: Cluster, metadata: {name: a}}`, ""},
		// Unknown to the cluster and the chart: left as written.
		{`{apiVersion: y.io/v1, kind: Thing, metadata: {name: a}}`, ""},
	} {
		o := obj(tc.doc)
		placeIn([]*unstructured.Unstructured{o}, "apps", mapper, namespacedKinds(crds))
		if got := o.GetNamespace(); got != tc.want {
			t.Errorf("%s: namespace %q, want %q", tc.doc, got, tc.want)
		}
	}
}
