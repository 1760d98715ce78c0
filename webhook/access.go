package webhook

import (
	"context"
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// reference is a Secret or ConfigMap a source names, in the provisioners'
// namespace, and the field that names it.
type reference struct {
	path     *field.Path
	resource string // secrets or configmaps
	kind     string // Secret or ConfigMap, for messages
	name     string
}

// references lists every Secret and ConfigMap src makes the provisioner read
// on its author's behalf: the provisioner may read them all, its users may
// not.
func references(fldPath *field.Path, src rukpakv1alpha1.BundleSource) []reference {
	var refs []reference
	secret := func(p *field.Path, name string) {
		if name != "" {
			refs = append(refs, reference{path: p, resource: "secrets", kind: "Secret", name: name})
		}
	}
	if src.Image != nil {
		secret(fldPath.Child("image", "pullSecret"), src.Image.ImagePullSecretName)
	}
	if src.Git != nil {
		secret(fldPath.Child("git", "auth", "secret", "name"), src.Git.Auth.SecretName())
	}
	if src.HTTP != nil {
		secret(fldPath.Child("http", "auth", "secret", "name"), src.HTTP.Auth.SecretName())
	}
	for i, cm := range src.ConfigMaps {
		if cm.ConfigMap.Name != "" {
			refs = append(refs, reference{
				path: fldPath.Child("configMaps").Index(i).Child("configMap", "name"), resource: "configmaps", kind: "ConfigMap", name: cm.ConfigMap.Name,
			})
		}
	}
	return refs
}

// checkAccess returns a Forbidden error for every reference the user of the
// admission request in ctx may not get, asking the API server with a
// SubjectAccessReview carrying the request's full user info (groups, extra,
// uid: whatever the authorizer may key on). denied holds the field paths
// of the references that failed, so no further check reveals anything about those objects.
func (v *SourceValidator) checkAccess(ctx context.Context, refs []reference) (errs field.ErrorList, denied map[string]bool) {
	if v.Reviewer == nil || len(refs) == 0 {
		return nil, nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return field.ErrorList{field.InternalError(refs[0].path, errors.New("no admission request to check access with"))}, nil
	}
	user := req.UserInfo
	answers := map[[2]string]bool{} // a name listed twice is reviewed once
	denied = map[string]bool{}
	for _, ref := range refs {
		key := [2]string{ref.resource, ref.name}
		allowed, seen := answers[key]
		if !seen {
			if allowed, err = v.mayGet(ctx, user, ref); err != nil {
				return field.ErrorList{field.InternalError(ref.path, err)}, nil
			}
			answers[key] = allowed
		}
		if !allowed {
			denied[ref.path.String()] = true
			errs = append(errs, field.Forbidden(ref.path, fmt.Sprintf("user %q may not get %s %s/%s", user.Username, ref.kind, v.Namespace, ref.name)))
		}
	}
	return errs, denied
}

func (v *SourceValidator) mayGet(ctx context.Context, user authenticationv1.UserInfo, ref reference) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: v.Namespace, Verb: "get", Resource: ref.resource, Name: ref.name,
		},
		User:   user.Username,
		UID:    user.UID,
		Groups: user.Groups,
		Extra:  extra(user.Extra),
	}}
	if err := v.Reviewer.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("reviewing access of user %q to %s %s/%s: %w", user.Username, ref.kind, v.Namespace, ref.name, err)
	}
	return sar.Status.Allowed && !sar.Status.Denied, nil
}

func extra(in map[string]authenticationv1.ExtraValue) map[string]authorizationv1.ExtraValue {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]authorizationv1.ExtraValue, len(in))
	for k, v := range in {
		out[k] = authorizationv1.ExtraValue(v)
	}
	return out
}

// Reviewer creates SubjectAccessReviews; a controller-runtime client does.
type Reviewer interface {
	Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error
}
