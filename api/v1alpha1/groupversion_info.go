// Package v1alpha1 contains the core.rukpak.io/v1alpha1 API: Bundle and
// BundleDeployment.
// +kubebuilder:object:generate=true
// +groupName=core.rukpak.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "core.rukpak.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Bundle{}, &BundleList{}, &BundleDeployment{}, &BundleDeploymentList{}, &Catalog{}, &CatalogList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
