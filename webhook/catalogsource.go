package webhook

import (
	"fmt"

	mmsemver "github.com/Masterminds/semver/v3"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// Bounds of a catalog source beyond the CRD's (which bounds the package
// name, the range's length and the channels): a selector is evaluated
// against every Catalog on each resolution.
const (
	maxSelectorLabels      = 32
	maxSelectorExpressions = 32
	maxSelectorValues      = 64
	// maxVersionRange is the CRD's maxLength of version, and
	// catalog/resolve's MaxVersionRangeLength, checked again here for
	// objects the CRD did not see (the webhook's own tests).
	maxVersionRange = 64
	maxPackageName  = 253
	maxChannels     = 256
)

// validateCatalogSource checks what the CRD cannot: the version range
// parses as the resolver reads it (Masterminds semver, as OLM v1), and
// the selector is valid and small.
func validateCatalogSource(p *field.Path, c *rukpakv1alpha1.CatalogSource) field.ErrorList {
	var errs field.ErrorList
	if c.PackageName == "" {
		errs = append(errs, field.Required(p.Child("packageName"), "the package to install"))
	} else if len(c.PackageName) > maxPackageName {
		errs = append(errs, field.TooLong(p.Child("packageName"), "", maxPackageName))
	}
	if len(c.Channels) > maxChannels {
		errs = append(errs, field.TooMany(p.Child("channels"), len(c.Channels), maxChannels))
	}
	if c.Version != "" {
		if len(c.Version) > maxVersionRange {
			errs = append(errs, field.TooLong(p.Child("version"), "", maxVersionRange))
		} else if _, err := mmsemver.NewConstraint(c.Version); err != nil {
			errs = append(errs, field.Invalid(p.Child("version"), c.Version, fmt.Sprintf("not a version range (such as \">=1.2 <2\", \"~1.2\", \"^1\", \"1.2.x\"): %v", err)))
		}
	}
	switch c.UpgradeConstraintPolicy {
	case "", rukpakv1alpha1.UpgradeConstraintPolicyCatalogProvided, rukpakv1alpha1.UpgradeConstraintPolicySelfCertified:
	default:
		errs = append(errs, field.NotSupported(p.Child("upgradeConstraintPolicy"), c.UpgradeConstraintPolicy,
			[]string{string(rukpakv1alpha1.UpgradeConstraintPolicyCatalogProvided), string(rukpakv1alpha1.UpgradeConstraintPolicySelfCertified)}))
	}
	if s := c.Selector; s != nil {
		sp := p.Child("selector")
		if len(s.MatchLabels) > maxSelectorLabels {
			errs = append(errs, field.TooMany(sp.Child("matchLabels"), len(s.MatchLabels), maxSelectorLabels))
		}
		if len(s.MatchExpressions) > maxSelectorExpressions {
			errs = append(errs, field.TooMany(sp.Child("matchExpressions"), len(s.MatchExpressions), maxSelectorExpressions))
		}
		for i, e := range s.MatchExpressions {
			if len(e.Values) > maxSelectorValues {
				errs = append(errs, field.TooMany(sp.Child("matchExpressions").Index(i).Child("values"), len(e.Values), maxSelectorValues))
			}
		}
		if len(errs) == 0 {
			errs = append(errs, metav1validation.ValidateLabelSelector(s, metav1validation.LabelSelectorValidationOptions{}, sp)...)
		}
	}
	return errs
}

// refuseCatalogSource refuses a catalog source where content must be
// named, not resolved: a Bundle's (immutable, content-addressed) and a
// Catalog's.
func refuseCatalogSource(p *field.Path, src rukpakv1alpha1.BundleSource, supported []string) field.ErrorList {
	if src.Type != rukpakv1alpha1.SourceTypeCatalog && src.Catalog == nil {
		return nil
	}
	return field.ErrorList{field.NotSupported(p.Child("type"), rukpakv1alpha1.SourceTypeCatalog, supported)}
}
