package webhook

import (
	"context"
	"errors"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

var serviceAccountPath = field.NewPath("spec", "serviceAccount")

// checkServiceAccount refuses naming a ServiceAccount the requesting user
// may not act as. The provisioner installs as spec.serviceAccount on the
// user's behalf, so naming one is acting as it: it takes what
// `kubectl --as=system:serviceaccount:NS:NAME` takes, impersonate on that
// ServiceAccount. Without this check anyone who may create a
// BundleDeployment could install with the rights of any ServiceAccount;
// with it (and a provisioner run with --require-service-account) creating
// BundleDeployments grants no more than the ServiceAccounts one may act as.
func (v *SourceValidator) checkServiceAccount(ctx context.Context, sa *rukpakv1alpha1.ServiceAccountReference) field.ErrorList {
	if v.Reviewer == nil || sa == nil {
		return nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return field.ErrorList{field.InternalError(serviceAccountPath, errors.New("no admission request to check access with"))}
	}
	user := req.UserInfo
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: sa.Namespace, Verb: "impersonate", Resource: "serviceaccounts", Name: sa.Name,
		},
		User:   user.Username,
		UID:    user.UID,
		Groups: user.Groups,
		Extra:  extra(user.Extra),
	}}
	if err := v.Reviewer.Create(ctx, sar); err != nil {
		return field.ErrorList{field.InternalError(serviceAccountPath, fmt.Errorf("reviewing whether user %q may impersonate service account %s/%s: %w", user.Username, sa.Namespace, sa.Name, err))}
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		return field.ErrorList{field.Forbidden(serviceAccountPath, fmt.Sprintf("user %q may not impersonate ServiceAccount %s/%s, which the provisioner would install as", user.Username, sa.Namespace, sa.Name))}
	}
	return nil
}
