package bundledeployment

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

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

// TestConfigHash: the same values written differently are the same config;
// any change of a value, and no config against an empty one, are not.
func TestConfigHash(t *testing.T) {
	j := func(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }
	cases := []struct {
		a, b *apiextensionsv1.JSON
		same bool
	}{
		{j(`{"a":1,"b":{"c":"x"}}`), j(`{ "b": {"c":"x"}, "a": 1 }`), true},
		{nil, j(``), true},
		{nil, j(`null`), true},
		{nil, j(`{}`), false},
		{j(`{"values":"message: a\n"}`), j(`{"values":"message: b\n"}`), false},
		{j(`{"a":1}`), j(`{"a":"1"}`), false},
	}
	for _, tc := range cases {
		ha, hb := ConfigHash(tc.a), ConfigHash(tc.b)
		if len(ha) != 16 || (ha == hb) != tc.same {
			t.Errorf("ConfigHash(%v) = %s, ConfigHash(%v) = %s; want same=%v", tc.a, ha, tc.b, hb, tc.same)
		}
	}
}
