package webhook

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// CatalogValidator admits Catalogs. A Catalog's source follows a Bundle
// source's rules (its ConfigMaps are immutable: new content is a new
// ConfigMap, or one deleted and created again, which the Catalog fetches);
// its spec may change, and every change of the source is reviewed for the
// requesting user as a creation is.
type CatalogValidator struct {
	Sources *SourceValidator
}

var _ admission.Validator[*rukpakv1alpha1.Catalog] = &CatalogValidator{}

// ValidateCreate checks the source of a new Catalog.
func (v *CatalogValidator) ValidateCreate(ctx context.Context, c *rukpakv1alpha1.Catalog) (admission.Warnings, error) {
	p := field.NewPath("spec", "source")
	if errs := refuseCatalogSource(p, c.Spec.Source, []string{"image", "git", "configMaps", "http"}); len(errs) > 0 {
		return nil, invalid(rukpakv1alpha1.GroupVersion.WithKind("Catalog").GroupKind(), c.Name, errs)
	}
	errs := v.Sources.Validate(ctx, p, c.Spec.Source)
	if c.Spec.Source.Type == rukpakv1alpha1.SourceTypeUpload {
		// Uploads are bound to one Bundle each (the content service's
		// PUT /uploads/NAME.tgz); a Catalog has no upload path.
		errs = append(errs, field.NotSupported(field.NewPath("spec", "source", "type"), c.Spec.Source.Type,
			[]string{"image", "git", "configMaps", "http"}))
	}
	return nil, invalid(rukpakv1alpha1.GroupVersion.WithKind("Catalog").GroupKind(), c.Name, errs)
}

// ValidateUpdate checks a changed source again, for the user changing it:
// they may not point the Catalog at Secrets or ConfigMaps they cannot read.
// Other changes (pollInterval, priority) pass.
func (v *CatalogValidator) ValidateUpdate(ctx context.Context, oldC, newC *rukpakv1alpha1.Catalog) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(oldC.Spec.Source, newC.Spec.Source) {
		return nil, nil
	}
	return v.ValidateCreate(ctx, newC)
}

// ValidateDelete allows every deletion.
func (v *CatalogValidator) ValidateDelete(context.Context, *rukpakv1alpha1.Catalog) (admission.Warnings, error) {
	return nil, nil
}
