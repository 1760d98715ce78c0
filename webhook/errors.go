package webhook

import (
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// invalid turns errs into the API error the webhook answers with: nil when
// there are none, an internal error when a check could not be made (so the
// caller retries rather than fixes its object), a Forbidden status when the
// user may not use something the object references, else an Invalid status
// whose message names every offending field.
func invalid(gk schema.GroupKind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	var forbidden []string
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeInternal:
			return apierrors.NewInternalError(e)
		case field.ErrorTypeForbidden:
			forbidden = append(forbidden, e.Field+": "+e.Detail)
		}
	}
	if len(forbidden) > 0 {
		// The message is only the fields and what is refused, so kubectl
		// prints: admission webhook "..." denied the request: <field>: user
		// "alice" may not get Secret rukpak-system/team-b-creds
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusForbidden,
			Reason:  metav1.StatusReasonForbidden,
			Message: strings.Join(forbidden, "; "),
			Details: &metav1.StatusDetails{Group: gk.Group, Kind: gk.Kind, Name: name},
		}}
	}
	return apierrors.NewInvalid(gk, name, errs)
}
