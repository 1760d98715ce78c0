package webhook

import (
	"context"
	"net/http"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// SpecImmutable is the reason (and the whole explanation) of a denied Bundle
// spec change. Scripts match kubectl's rendering of it:
//
//	Error from server (bundle.spec is immutable): admission webhook "vbundles.core.rukpak.io" denied the request: bundle.spec is immutable
const SpecImmutable = "bundle.spec is immutable"

// errSpecImmutable carries SpecImmutable as the status reason and no message:
// the API server then uses the reason as the explanation after "denied the
// request: ", and kubectl prints the reason in parentheses.
func errSpecImmutable() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusForbidden,
		Reason: SpecImmutable,
	}}
}

// BundleValidator admits Bundles.
type BundleValidator struct {
	Sources *SourceValidator
}

var _ admission.Validator[*rukpakv1alpha1.Bundle] = &BundleValidator{}

// ValidateCreate checks the source of a new Bundle.
func (v *BundleValidator) ValidateCreate(ctx context.Context, b *rukpakv1alpha1.Bundle) (admission.Warnings, error) {
	p := field.NewPath("spec", "source")
	if errs := refuseCatalogSource(p, b.Spec.Source, []string{"image", "git", "configMaps", "http", "upload"}); len(errs) > 0 {
		// A Bundle names its content; a catalog source is resolved to one
		// by a BundleDeployment.
		return nil, invalid(rukpakv1alpha1.GroupVersion.WithKind("Bundle").GroupKind(), b.Name, errs)
	}
	errs := v.Sources.Validate(ctx, p, b.Spec.Source)
	return nil, invalid(rukpakv1alpha1.GroupVersion.WithKind("Bundle").GroupKind(), b.Name, errs)
}

// ValidateUpdate denies any change to the spec. An unchanged spec was
// checked at creation, so metadata updates (finalizers, labels, owner
// references) always pass: the provisioners must be able to release a
// Bundle even if a ConfigMap it references became mutable later.
func (v *BundleValidator) ValidateUpdate(_ context.Context, oldB, newB *rukpakv1alpha1.Bundle) (admission.Warnings, error) {
	if !equality.Semantic.DeepEqual(oldB.Spec, newB.Spec) {
		if errs := refuseCatalogSource(field.NewPath("spec", "source"), newB.Spec.Source, []string{"image", "git", "configMaps", "http", "upload"}); len(errs) > 0 {
			return nil, invalid(rukpakv1alpha1.GroupVersion.WithKind("Bundle").GroupKind(), newB.Name, errs)
		}
		return nil, errSpecImmutable()
	}
	return nil, nil
}

// ValidateDelete allows every deletion.
func (v *BundleValidator) ValidateDelete(context.Context, *rukpakv1alpha1.Bundle) (admission.Warnings, error) {
	return nil, nil
}
