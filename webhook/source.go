package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
)

// SourceValidator checks the parts of a Bundle source that the CRD schema
// cannot express.
type SourceValidator struct {
	// Reader looks up referenced ConfigMaps. Use an uncached reader: the
	// answer must reflect the ConfigMap as it is now.
	Reader client.Reader
	// Reviewer asks the API server whether the requesting user may get
	// the Secrets and ConfigMaps a source references. Nil skips the check
	// (unit tests of the other rules only).
	Reviewer Reviewer
	// Namespace is the provisioners' namespace, where referenced Secrets
	// and ConfigMaps live.
	Namespace string
}

// Validate returns the problems of src; fldPath is the path of src in the
// object, so each message names the offending field. A Secret or ConfigMap
// the requesting user may not get is a Forbidden error: a source makes the
// provisioner read it on the user's behalf, so naming another team's
// credentials or content would hand them over.
func (v *SourceValidator) Validate(ctx context.Context, fldPath *field.Path, src rukpakv1alpha1.BundleSource) field.ErrorList {
	errs, denied := v.checkAccess(ctx, references(fldPath, src))
	if src.Type == rukpakv1alpha1.SourceTypeUpload && src.Upload == nil {
		// RukPak's words; its clients always write "upload: {}".
		errs = append(errs, field.Required(fldPath.Child("upload"), `bundle.spec.source.upload must be set for source type "upload"`))
	}
	if src.Git != nil && src.Git.Directory != "" {
		p := fldPath.Child("git", "directory")
		if _, err := unpack.CleanName(src.Git.Directory); err != nil {
			errs = append(errs, field.Invalid(p, src.Git.Directory, "must be a relative path inside the repository"))
		}
	}
	for i, cm := range src.ConfigMaps {
		p := fldPath.Child("configMaps").Index(i)
		if cm.Path != "" {
			if _, err := unpack.CleanName(cm.Path); err != nil {
				errs = append(errs, field.Invalid(p.Child("path"), cm.Path, "must be a relative path inside the bundle root"))
			}
		}
		// Only a user who may read a ConfigMap learns whether it exists
		// and is immutable.
		if np := p.Child("configMap", "name"); cm.ConfigMap.Name != "" && !denied[np.String()] {
			errs = append(errs, v.validateConfigMap(ctx, np, cm.ConfigMap.Name)...)
		}
	}
	return errs
}

// validateConfigMap rejects a referenced ConfigMap that exists and could
// change under the immutable Bundle. A ConfigMap that does not exist yet is
// allowed: the provisioner reports it not found (UnpackFailed) and unpacks
// the Bundle once it appears.
func (v *SourceValidator) validateConfigMap(ctx context.Context, p *field.Path, name string) field.ErrorList {
	if v.Reader == nil {
		return nil
	}
	var cm corev1.ConfigMap
	err := v.Reader.Get(ctx, types.NamespacedName{Namespace: v.Namespace, Name: name}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return field.ErrorList{field.InternalError(p, fmt.Errorf("getting ConfigMap %s/%s: %w", v.Namespace, name, err))}
	case cm.Immutable == nil || !*cm.Immutable:
		return field.ErrorList{field.Invalid(p, name, fmt.Sprintf("ConfigMap %s/%s must be immutable (set immutable: true)", v.Namespace, name))}
	}
	return nil
}
