package bundle

import (
	"context"
	"reflect"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// TestBundlesUsingConfigMap: a ConfigMap event brings back exactly the
// Bundles of this class whose configMaps source names it, so a Bundle
// waiting for its ConfigMap unpacks when it appears, not at the next
// periodic retry.
func TestBundlesUsingConfigMap(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := rukpakv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	bundle := func(name, class string, src rukpakv1alpha1.BundleSource) client.Object {
		return &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: class, Source: src}}
	}
	fromCMs := func(names ...string) rukpakv1alpha1.BundleSource {
		src := rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps}
		for _, n := range names {
			src.ConfigMaps = append(src.ConfigMaps, rukpakv1alpha1.ConfigMapSource{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: n}, Path: "manifests"})
		}
		return src
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		bundle("uses-a", rukpakv1alpha1.ProvisionerClassPlain, fromCMs("a")),
		bundle("uses-b-and-a", rukpakv1alpha1.ProvisionerClassPlain, fromCMs("b", "a")),
		bundle("uses-b", rukpakv1alpha1.ProvisionerClassPlain, fromCMs("b")),
		bundle("other-class", rukpakv1alpha1.ProvisionerClassRegistry, fromCMs("a")),
		bundle("image", rukpakv1alpha1.ProvisionerClassPlain, rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: "example.com/a:v1"}}),
	).Build()
	r := &Reconciler{Client: c, Class: rukpakv1alpha1.ProvisionerClassPlain}

	for _, tc := range []struct {
		configMap string
		want      []string
	}{
		{"a", []string{"uses-a", "uses-b-and-a"}},
		{"b", []string{"uses-b", "uses-b-and-a"}},
		{"c", nil},
	} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: tc.configMap, Namespace: "rukpak-system"}}
		var got []string
		for _, req := range r.bundlesUsingConfigMap(context.Background(), cm) {
			got = append(got, req.Name)
		}
		if !reflect.DeepEqual(sortedCopy(got), sortedCopy(tc.want)) {
			t.Errorf("ConfigMap %s brings back %v, want %v", tc.configMap, got, tc.want)
		}
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
