package webhook

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// invalid turns errs into the API error the webhook answers with: nil when
// there are none, an internal error when a check could not be made (so the
// caller retries rather than fixes its object), else an Invalid status whose
// message names every offending field.
func invalid(gk schema.GroupKind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	for _, e := range errs {
		if e.Type == field.ErrorTypeInternal {
			return apierrors.NewInternalError(e)
		}
	}
	return apierrors.NewInvalid(gk, name, errs)
}
