package crdupgrade

import (
	"context"
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// versionSchema validates objects of one CRD version as the API server
// does on create: OpenAPI schema, embedded resources, list types and CEL
// rules (transition rules, which need an old object, are not run).
type versionSchema struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

func compileVersion(crd *apiextensionsv1.CustomResourceDefinition, version string) (*versionSchema, error) {
	var v1 *apiextensionsv1.CustomResourceValidation
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == version {
			v1 = crd.Spec.Versions[i].Schema
		}
	}
	if v1 == nil || v1.OpenAPIV3Schema == nil {
		return nil, nil
	}
	internal := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v1, internal, nil); err != nil {
		return nil, fmt.Errorf("converting the schema of version %s: %w", version, err)
	}
	s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("the schema of version %s is not structural: %w", version, err)
	}
	s = s.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		return nil, fmt.Errorf("the defaults of version %s: %w", version, err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("compiling the schema of version %s: %w", version, err)
	}
	return &versionSchema{
		structural: s,
		validator:  validator,
		cel:        cel.NewValidator(s, true, celconfig.PerCallLimit),
	}, nil
}

// validate returns obj's validation errors.
func (v *versionSchema) validate(ctx context.Context, obj map[string]any) field.ErrorList {
	errs := apiservervalidation.ValidateCustomResource(nil, obj, v.validator)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, obj, v.structural, false)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, v.structural, obj)...)
	if v.cel != nil {
		celErrs, _ := v.cel.Validate(ctx, nil, v.structural, obj, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	return errs
}

// pruned returns the paths of obj's fields the schema would drop (obj is
// not changed).
func (v *versionSchema) pruned(obj map[string]any) []string {
	return pruning.PruneWithOptions(runtime.DeepCopyJSON(obj), v.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
}
