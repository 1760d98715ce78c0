package bundledeployment

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// installNamespace returns spec.config.installNamespace, or "" if unset.
// registry+v1 content already places every object there when it is
// converted; for other content it is where objects that name no namespace
// go. Without it such objects are an error (see release.Manager): they are
// never installed into the provisioner's own namespace, and "default" is a
// guess no cluster admin asked for.
func installNamespace(bd *rukpakv1alpha1.BundleDeployment) (string, error) {
	if bd.Spec.Config == nil || len(bd.Spec.Config.Raw) == 0 {
		return "", nil
	}
	// Other keys belong to the content's format (registry+v1 checks its
	// own strictly); only this one is read here.
	var config struct {
		InstallNamespace *string `json:"installNamespace"`
	}
	if err := json.Unmarshal(bd.Spec.Config.Raw, &config); err != nil {
		return "", fmt.Errorf("invalid spec.config: %w", err)
	}
	if config.InstallNamespace == nil {
		return "", nil
	}
	ns := *config.InstallNamespace
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return "", fmt.Errorf("spec.config.installNamespace %q is not a valid namespace name: %s", ns, strings.Join(errs, "; "))
	}
	return ns, nil
}

// placeObjects puts objects that name no namespace into the install
// namespace, if the BundleDeployment sets one. Cluster-scoped objects get
// theirs dropped again when they are applied.
func placeObjects(objs []*unstructured.Unstructured, bd *rukpakv1alpha1.BundleDeployment) error {
	ns, err := installNamespace(bd)
	if err != nil || ns == "" {
		return err
	}
	for _, o := range objs {
		if o.GetNamespace() == "" {
			o.SetNamespace(ns)
		}
	}
	return nil
}
