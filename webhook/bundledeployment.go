package webhook

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// BundleDeploymentValidator admits BundleDeployments: the template's source
// follows the same rules as a Bundle's, and the user may act as the
// ServiceAccount the BundleDeployment installs as (serviceaccount.go).
type BundleDeploymentValidator struct {
	Sources    *SourceValidator
	Delegation Delegation
}

var _ admission.Validator[*rukpakv1alpha1.BundleDeployment] = &BundleDeploymentValidator{}

var templateSourcePath = field.NewPath("spec", "template", "spec", "source")

// ValidateCreate checks the template's source, the identity it installs as
// and the steering annotations.
func (v *BundleDeploymentValidator) ValidateCreate(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment) (admission.Warnings, error) {
	errs := v.Sources.Validate(ctx, templateSourcePath, bd.Spec.Template.Spec.Source)
	errs = append(errs, v.checkDelegation(ctx, nil, bd)...)
	errs = append(errs, v.Sources.checkValuesFrom(ctx, nil, bd)...)
	return nil, invalid(rukpakv1alpha1.GroupVersion.WithKind("BundleDeployment").GroupKind(), bd.Name, errs)
}

// ValidateUpdate checks the template's source when it changes, and the
// identity the BundleDeployment installs as when anything deciding what is
// installed or as whom changes. What is unchanged was checked before, and
// re-checking it could block finalizer removal because of a ConfigMap
// edited (or a permission withdrawn) since.
func (v *BundleDeploymentValidator) ValidateUpdate(ctx context.Context, oldBD, newBD *rukpakv1alpha1.BundleDeployment) (admission.Warnings, error) {
	var errs field.ErrorList
	if !equality.Semantic.DeepEqual(oldBD.Spec.Template.Spec.Source, newBD.Spec.Template.Spec.Source) {
		errs = v.Sources.Validate(ctx, templateSourcePath, newBD.Spec.Template.Spec.Source)
	}
	errs = append(errs, v.checkDelegation(ctx, oldBD, newBD)...)
	errs = append(errs, v.Sources.checkValuesFrom(ctx, oldBD, newBD)...)
	return nil, invalid(rukpakv1alpha1.GroupVersion.WithKind("BundleDeployment").GroupKind(), newBD.Name, errs)
}

// ValidateDelete allows every deletion.
func (v *BundleDeploymentValidator) ValidateDelete(context.Context, *rukpakv1alpha1.BundleDeployment) (admission.Warnings, error) {
	return nil, nil
}

func equalSpec(a, b rukpakv1alpha1.BundleDeploymentSpec) bool {
	return equality.Semantic.DeepEqual(a, b)
}
