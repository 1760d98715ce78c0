package webhook

import (
	"errors"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// originRukPak marks a field error whose Detail is the whole of RukPak
// v0.16's message for the same refusal.
const originRukPak = "rukpak"

// rukpak is a refusal RukPak v0.16's webhook made too, with its message.
func rukpak(p *field.Path, value any, message string) *field.Error {
	e := field.Invalid(p, value, message)
	e.Origin = originRukPak
	return e
}

// invalid turns errs into the API error the webhook answers with: nil when
// there are none, an internal error when a check could not be made (so the
// caller retries rather than fixes its object), RukPak's denial when RukPak
// refused the object too, a Forbidden status when the user may not use
// something the object references, else an Invalid status whose message
// names every offending field.
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
	if denial := rukpakDenial(errs); denial != nil {
		return denial
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

// rukpakDenial answers as RukPak's webhook did when errs hold one of its
// refusals: its messages first, in its order, then this project's own
// problems; one message alone, several as [a, b] (RukPak aggregated them
// so). The message is the status reason, with code 403 and no message, as
// controller-runtime denied a plain error then: the API server shows the
// reason after "denied the request: ", and kubectl prints it in
// parentheses too. Nil when RukPak would have admitted the object.
func rukpakDenial(errs field.ErrorList) error {
	var words, ours []error
	for _, e := range errs {
		switch {
		case e.Origin == originRukPak:
			words = append(words, errors.New(e.Detail))
		case e.Type == field.ErrorTypeForbidden:
			ours = append(ours, errors.New(e.Field+": "+e.Detail))
		default:
			ours = append(ours, e)
		}
	}
	if len(words) == 0 {
		return nil
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusForbidden,
		Reason: metav1.StatusReason(utilerrors.NewAggregate(append(words, ours...)).Error()),
	}}
}
