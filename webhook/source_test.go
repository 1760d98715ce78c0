package webhook

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// TestSourcePaths covers the path rules without an API server; ConfigMap
// lookups are exercised against a real one in TestAdmission.
func TestSourcePaths(t *testing.T) {
	git := func(dir string) rukpakv1alpha1.BundleSource {
		return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit, Git: &rukpakv1alpha1.GitSource{Directory: dir}}
	}
	cm := func(path string) rukpakv1alpha1.BundleSource {
		return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps, ConfigMaps: []rukpakv1alpha1.ConfigMapSource{{Path: path}}}
	}
	cases := []struct {
		name string
		src  rukpakv1alpha1.BundleSource
		want string // "" when valid
	}{
		{"git root", git(""), ""},
		{"git dot", git("."), ""},
		{"git nested", git("a/b/../c"), ""},
		{"git dot-dot", git(".."), "spec.source.git.directory"},
		{"git escaping after clean", git("a/../../b"), "spec.source.git.directory"},
		{"git absolute", git("/a"), "spec.source.git.directory"},
		{"git backslash escape", git(`..\x`), "spec.source.git.directory"},
		{"configMaps root", cm(""), ""},
		{"configMaps nested", cm("manifests/x"), ""},
		{"configMaps escaping", cm("../x"), "spec.source.configMaps[0].path"},
		{"configMaps absolute", cm("/x"), "spec.source.configMaps[0].path"},
		{"image", rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: "x"}}, ""},
	}
	v := &SourceValidator{Namespace: "rukpak-system"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := v.Validate(context.Background(), field.NewPath("spec", "source"), tc.src)
			if tc.want == "" {
				if len(errs) != 0 {
					t.Fatalf("want valid, got %v", errs.ToAggregate())
				}
				return
			}
			if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), tc.want+": Invalid value") {
				t.Fatalf("got %v, want one error on %s", errs.ToAggregate(), tc.want)
			}
		})
	}
}

func TestSpecImmutable(t *testing.T) {
	base := rukpakv1alpha1.Bundle{Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: "p", Source: rukpakv1alpha1.BundleSource{
		Type: rukpakv1alpha1.SourceTypeConfigMaps, ConfigMaps: []rukpakv1alpha1.ConfigMapSource{}}}}
	cases := []struct {
		name   string
		mutate func(*rukpakv1alpha1.Bundle)
		denied bool
	}{
		{"labels", func(b *rukpakv1alpha1.Bundle) { b.Labels = map[string]string{"a": "b"} }, false},
		{"status", func(b *rukpakv1alpha1.Bundle) { b.Status.Phase = "Unpacked" }, false},
		{"nil versus empty list is no change", func(b *rukpakv1alpha1.Bundle) { b.Spec.Source.ConfigMaps = nil }, false},
		{"class", func(b *rukpakv1alpha1.Bundle) { b.Spec.ProvisionerClassName = "q" }, true},
		{"configMap added", func(b *rukpakv1alpha1.Bundle) {
			b.Spec.Source.ConfigMaps = []rukpakv1alpha1.ConfigMapSource{{Path: "x"}}
		}, true},
	}
	v := &BundleValidator{Sources: &SourceValidator{}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			newB := base.DeepCopy()
			tc.mutate(newB)
			_, err := v.ValidateUpdate(context.Background(), base.DeepCopy(), newB)
			if (err != nil) != tc.denied {
				t.Fatalf("denied = %v (%v), want %v", err != nil, err, tc.denied)
			}
		})
	}
}
