package provisioner

import (
	"testing"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

func TestCacheTransform(t *testing.T) {
	transform := CacheTransform()
	ca := func() string { return string([]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")) }
	bd := &rukpakv1alpha1.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "a",
		Annotations:   map[string]string{lastApplied: "{...}", "keep": "me"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	bd.Spec.Template.Spec.Source = rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: "r", CertificateData: ca()}}
	b := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	b.Spec.Source = rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: "r", CertificateData: ca()}}
	b.Status.ResolvedSource = &rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: "r@sha256:x", CertificateData: ca()}}
	for _, o := range []any{bd, b} {
		if _, err := transform(o); err != nil {
			t.Fatal(err)
		}
	}
	if bd.ManagedFields != nil {
		t.Error("managedFields kept")
	}
	if _, ok := bd.Annotations[lastApplied]; ok || bd.Annotations["keep"] != "me" {
		t.Errorf("annotations %v: want the last-applied one gone, the others kept", bd.Annotations)
	}
	want := bd.Spec.Template.Spec.Source.Image.CertificateData
	for _, got := range []string{b.Spec.Source.Image.CertificateData, b.Status.ResolvedSource.Image.CertificateData} {
		if got != want {
			t.Fatalf("certificateData changed: %q", got)
		}
		if unsafe.StringData(got) != unsafe.StringData(want) {
			t.Error("equal certificateData not shared")
		}
	}
	// Objects without a source or annotations pass through.
	if _, err := transform(&rukpakv1alpha1.Bundle{}); err != nil {
		t.Fatal(err)
	}
}
