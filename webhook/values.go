package webhook

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rukpak-dev/rukpak/api/helmvalues"
	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// checkValuesFrom reviews the values sources of a helm-class
// BundleDeployment (spec.config.valuesFrom) for the requesting user, as
// Validate reviews a source's Secrets and ConfigMaps: the provisioner reads
// them and hands their content to a chart the user chooses, so naming one
// must take get on it. oldBD is nil on create. An update is reviewed
// whenever the spec changes, not only valuesFrom: a new template or class
// with the same sources would hand them to other content, chosen by
// whoever writes it. Malformed sources are Invalid.
func (v *SourceValidator) checkValuesFrom(ctx context.Context, oldBD, bd *rukpakv1alpha1.BundleDeployment) field.ErrorList {
	if bd.Spec.ProvisionerClassName != rukpakv1alpha1.ProvisionerClassHelm {
		return nil
	}
	if oldBD != nil && equality.Semantic.DeepEqual(oldBD.Spec, bd.Spec) {
		return nil
	}
	var raw []byte
	if bd.Spec.Config != nil {
		raw = bd.Spec.Config.Raw
	}
	sources, errs := helmvalues.FromConfig(raw)
	if len(errs) > 0 {
		return errs
	}
	refs := make([]reference, 0, len(sources))
	for i, s := range sources {
		ref := reference{path: helmvalues.Path.Index(i).Child("name"), kind: s.Kind, name: s.Name, resource: "configmaps"}
		if s.Kind == helmvalues.KindSecret {
			ref.resource = "secrets"
		}
		refs = append(refs, ref)
	}
	errs, _ = v.checkAccess(ctx, refs)
	return errs
}
