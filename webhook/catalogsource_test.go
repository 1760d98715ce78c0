package webhook

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

func TestCatalogSource(t *testing.T) {
	src := func(mutate func(*rukpakv1alpha1.CatalogSource)) rukpakv1alpha1.BundleSource {
		c := &rukpakv1alpha1.CatalogSource{PackageName: "kube-green", Version: ">=0.5 <0.7"}
		if mutate != nil {
			mutate(c)
		}
		return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeCatalog, Catalog: c}
	}
	many := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[strings.Repeat("k", i+1)] = "v"
		}
		return m
	}
	for _, tc := range []struct {
		name string
		src  rukpakv1alpha1.BundleSource
		want string // "" when valid
	}{
		{"valid", src(nil), ""},
		{"every range form", src(func(c *rukpakv1alpha1.CatalogSource) { c.Version = "~1.2 || ^2 || 3.1.x || >=4, <5" }), ""},
		{"selector", src(func(c *rukpakv1alpha1.CatalogSource) {
			c.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ops"}}
		}), ""},
		{"no member", rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeCatalog}, `bundle.spec.source.catalog must be set for source type "catalog"`},
		{"no package", src(func(c *rukpakv1alpha1.CatalogSource) { c.PackageName = "" }), "spec.template.spec.source.catalog.packageName: Required value"},
		{"oversized package name", src(func(c *rukpakv1alpha1.CatalogSource) { c.PackageName = strings.Repeat("p", 254) }), "packageName: Too long: may not be more than 253"},
		{"oversized range", src(func(c *rukpakv1alpha1.CatalogSource) { c.Version = strings.Repeat("1", 65) }), "version: Too long: may not be more than 64"},
		{"not a range", src(func(c *rukpakv1alpha1.CatalogSource) { c.Version = ">=banana" }), "version: Invalid value: \">=banana\": not a version range"},
		{"too many channels", src(func(c *rukpakv1alpha1.CatalogSource) { c.Channels = make([]string, 257) }), "channels: Too many: 257"},
		{"unknown policy", src(func(c *rukpakv1alpha1.CatalogSource) { c.UpgradeConstraintPolicy = "Whatever" }), "upgradeConstraintPolicy: Unsupported value"},
		{"huge selector", src(func(c *rukpakv1alpha1.CatalogSource) { c.Selector = &metav1.LabelSelector{MatchLabels: many(33)} }), "matchLabels: Too many: 33"},
		{"invalid selector", src(func(c *rukpakv1alpha1.CatalogSource) {
			c.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}}
		}), "operator: Invalid value: \"Near\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := (&SourceValidator{}).Validate(context.Background(), templateSourcePath, tc.src)
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs.ToAggregate())
				}
				return
			}
			if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.want) {
				t.Fatalf("got %v, want %q", errs.ToAggregate(), tc.want)
			}
		})
	}
}

func TestCatalogSourceRefusedOnBundlesAndCatalogs(t *testing.T) {
	ctx := context.Background()
	cat := rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeCatalog, Catalog: &rukpakv1alpha1.CatalogSource{PackageName: "kube-green"}}
	b := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: "p", Source: cat}}
	bv := &BundleValidator{Sources: &SourceValidator{}}
	if _, err := bv.ValidateCreate(ctx, b); err == nil || !strings.Contains(err.Error(), `spec.source.type: Unsupported value: "catalog"`) {
		t.Fatalf("bundle create: %v", err)
	}
	old := b.DeepCopy()
	old.Spec.Source = rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: "x"}}
	if _, err := bv.ValidateUpdate(ctx, old, b); err == nil || !strings.Contains(err.Error(), `spec.source.type: Unsupported value: "catalog"`) {
		t.Fatalf("bundle update: %v", err)
	}
	c := &rukpakv1alpha1.Catalog{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: rukpakv1alpha1.CatalogSpec{Source: cat}}
	if _, err := (&CatalogValidator{Sources: &SourceValidator{}}).ValidateCreate(ctx, c); err == nil || !strings.Contains(err.Error(), `spec.source.type: Unsupported value: "catalog"`) {
		t.Fatalf("catalog create: %v", err)
	}
}
