package bundledeployment

import (
	"testing"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

func TestTemplateHash(t *testing.T) {
	base := rukpakv1alpha1.BundleTemplate{
		Metadata: rukpakv1alpha1.TemplateMetadata{Labels: map[string]string{"a": "1", "b": "2"}},
		Spec: rukpakv1alpha1.BundleSpec{
			ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
			Source:               rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: "r/x:v1"}},
		},
	}
	h0, err := TemplateHash(base)
	if err != nil {
		t.Fatal(err)
	}
	if len(h0) != hashLength {
		t.Fatalf("hash %q has length %d, want %d", h0, len(h0), hashLength)
	}
	// The same template, built in another order, hashes the same.
	same := base
	same.Metadata.Labels = map[string]string{"b": "2", "a": "1"}
	if h, _ := TemplateHash(same); h != h0 {
		t.Errorf("equal templates hash differently: %q vs %q", h, h0)
	}
	tests := map[string]func(t *rukpakv1alpha1.BundleTemplate){
		"image ref": func(t *rukpakv1alpha1.BundleTemplate) {
			t.Spec.Source.Image = &rukpakv1alpha1.ImageSource{Ref: "r/x:v2"}
		},
		"class":       func(t *rukpakv1alpha1.BundleTemplate) { t.Spec.ProvisionerClassName = "other" },
		"label value": func(t *rukpakv1alpha1.BundleTemplate) { t.Metadata.Labels = map[string]string{"a": "1", "b": "3"} },
		"annotation":  func(t *rukpakv1alpha1.BundleTemplate) { t.Metadata.Annotations = map[string]string{"x": "y"} },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			tmpl := *base.DeepCopy()
			mutate(&tmpl)
			h, err := TemplateHash(tmpl)
			if err != nil {
				t.Fatal(err)
			}
			if h == h0 {
				t.Errorf("changing the %s did not change the hash %q", name, h)
			}
		})
	}
}
