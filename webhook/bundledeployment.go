package webhook

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// BundleDeploymentValidator admits BundleDeployments: the template's source
// follows the same rules as a Bundle's.
type BundleDeploymentValidator struct {
	Sources *SourceValidator
}

var _ admission.Validator[*rukpakv1alpha1.BundleDeployment] = &BundleDeploymentValidator{}

var templateSourcePath = field.NewPath("spec", "template", "spec", "source")

// ValidateCreate checks the template's source.
func (v *BundleDeploymentValidator) ValidateCreate(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment) (admission.Warnings, error) {
	return nil, v.validate(ctx, bd)
}

// ValidateUpdate checks the template's source when it changes. An unchanged
// template was checked before, and re-checking it could block finalizer
// removal because of a ConfigMap edited since.
func (v *BundleDeploymentValidator) ValidateUpdate(ctx context.Context, oldBD, newBD *rukpakv1alpha1.BundleDeployment) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(oldBD.Spec.Template.Spec.Source, newBD.Spec.Template.Spec.Source) {
		return nil, nil
	}
	return nil, v.validate(ctx, newBD)
}

// ValidateDelete allows every deletion.
func (v *BundleDeploymentValidator) ValidateDelete(context.Context, *rukpakv1alpha1.BundleDeployment) (admission.Warnings, error) {
	return nil, nil
}

func (v *BundleDeploymentValidator) validate(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment) error {
	errs := v.Sources.Validate(ctx, templateSourcePath, bd.Spec.Template.Spec.Source)
	return invalid(rukpakv1alpha1.GroupVersion.WithKind("BundleDeployment").GroupKind(), bd.Name, errs)
}
