package webhook

import (
	"context"
	"fmt"
	"path"
	"strings"

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
//
// Where RukPak v0.16's webhook refused the same source, the problem is
// worded as RukPak worded it (rukpak); the checks this project adds keep
// their own words, after RukPak's.
func (v *SourceValidator) Validate(ctx context.Context, fldPath *field.Path, src rukpakv1alpha1.BundleSource) field.ErrorList {
	if err := memberMissing(fldPath, src); err != nil {
		// The CRD refuses this first; RukPak checked nothing further.
		return field.ErrorList{err}
	}
	errs, denied := v.checkAccess(ctx, references(fldPath, src))
	if src.Catalog != nil {
		errs = append(errs, validateCatalogSource(fldPath.Child("catalog"), src.Catalog)...)
	}
	if src.Git != nil && src.Git.Directory != "" {
		p := fldPath.Child("git", "directory")
		if escapes(src.Git.Directory) {
			errs = append(errs, rukpak(p, src.Git.Directory,
				`bundle.spec.source.git.directory begins with "../": directory must define path within the repository`))
		} else if _, err := unpack.CleanName(src.Git.Directory); err != nil {
			errs = append(errs, field.Invalid(p, src.Git.Directory, "must be a relative path inside the repository"))
		}
	}
	for i, cm := range src.ConfigMaps {
		p := fldPath.Child("configMaps").Index(i)
		if cm.Path != "" {
			if escapes(cm.Path) {
				errs = append(errs, rukpak(p.Child("path"), cm.Path,
					fmt.Sprintf("bundle.spec.source.configmaps[%d].path is invalid: %q is outside bundle root", i, cm.Path)))
			} else if _, err := unpack.CleanName(cm.Path); err != nil {
				errs = append(errs, field.Invalid(p.Child("path"), cm.Path, "must be a relative path inside the bundle root"))
			}
		}
		// Only a user who may read a ConfigMap learns whether it exists
		// and is immutable.
		if np := p.Child("configMap", "name"); cm.ConfigMap.Name != "" && !denied[np.String()] {
			errs = append(errs, v.validateConfigMap(ctx, np, i, cm.ConfigMap.Name)...)
		}
	}
	return errs
}

// memberMissing is RukPak's refusal of a source whose type's member is
// unset, or nil. The words name the Bundle's spec also for a
// BundleDeployment's template: it is the spec of the Bundles generated
// from it, and the CRD's rules (on the type both share) say the same.
func memberMissing(fldPath *field.Path, src rukpakv1alpha1.BundleSource) *field.Error {
	var missing bool
	member := string(src.Type)
	switch src.Type {
	case rukpakv1alpha1.SourceTypeImage:
		missing = src.Image == nil
	case rukpakv1alpha1.SourceTypeGit:
		missing = src.Git == nil
	case rukpakv1alpha1.SourceTypeConfigMaps:
		// RukPak's words spell the member and type in lower case.
		missing, member = len(src.ConfigMaps) == 0, "configmaps"
	case rukpakv1alpha1.SourceTypeHTTP:
		missing = src.HTTP == nil
	case rukpakv1alpha1.SourceTypeUpload:
		missing = src.Upload == nil
	case rukpakv1alpha1.SourceTypeCatalog:
		missing = src.Catalog == nil
	}
	if !missing {
		return nil
	}
	return rukpak(fldPath.Child(string(src.Type)), nil,
		fmt.Sprintf("bundle.spec.source.%s must be set for source type %q", member, member))
}

// escapes reports the paths RukPak refused: those that, cleaned, begin
// with "../". Others that leave the root ("..", absolute paths, "..\")
// are this project's refusals (unpack.CleanName).
func escapes(p string) bool {
	return strings.HasPrefix(path.Clean(p), "../")
}

// validateConfigMap rejects a referenced ConfigMap that exists and could
// change under the immutable Bundle, as RukPak did. A ConfigMap that does
// not exist yet is allowed: the provisioner reports it not found
// (UnpackFailed) and unpacks the Bundle once it appears.
func (v *SourceValidator) validateConfigMap(ctx context.Context, p *field.Path, i int, name string) field.ErrorList {
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
		return field.ErrorList{rukpak(p, name,
			fmt.Sprintf("bundle.spec.source.configmaps[%d].configmap.name is invalid: configmap %q is not immutable", i, name))}
	}
	return nil
}
