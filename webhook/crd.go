package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/crdupgrade"
)

// Hand edits of release-owned CRDs. The provisioner's preflight
// (internal/crdupgrade) checks a CRD before a pivot replaces it; an edit by
// hand never passes through it, and drift correction reverts such an edit
// only after it has broken the stored objects. This webhook runs the same
// check on every spec change of a CRD labelled as a BundleDeployment's, with
// the same message and the same opt-out annotation on the owning
// BundleDeployment. The shipped configuration sends it only those updates,
// never the provisioner's own, and ignores its failures: while it is down
// every CRD update goes through unchecked (docs/security.md).

// DefaultCRDCheckTimeout bounds one check, under the configuration's
// timeoutSeconds (5): the webhook answers, with a warning, before the API
// server gives up on it.
const DefaultCRDCheckTimeout = 4 * time.Second

// DefaultCRDCheckClusterRole is the ClusterRole the provisioner keeps
// granting list on the resources of every release-owned CRD, bound to the
// webhook's ServiceAccount by the shipped ClusterRoleBinding of that name.
const DefaultCRDCheckClusterRole = "rukpak-webhook-crd-check"

// CRDCheck refuses an update of a release-owned CRD that the CRD upgrade
// check finds breaks existing objects.
type CRDCheck struct {
	// BundleDeployments reads the owning BundleDeployment (an uncached
	// reader: one get per checked edit).
	BundleDeployments client.Reader
	// Objects lists the CRD's custom resources with the webhook's rights.
	Objects crdupgrade.Lister
	// Options bound a check; their Budget is the webhook's own.
	Options crdupgrade.Options
	// ClusterRole is named in the warning when the webhook may not list a
	// CRD's objects.
	ClusterRole string
}

var crdKind = apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")

// Handle admits everything but a spec change of a CRD owned by a
// BundleDeployment that breaks its objects, or whose objects are more than
// the check's bounds. A check that cannot run admits with a warning saying
// why: an unchecked edit is never admitted silently.
func (c *CRDCheck) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	oldCRD, newCRD := &apiextensionsv1.CustomResourceDefinition{}, &apiextensionsv1.CustomResourceDefinition{}
	if err := json.Unmarshal(req.OldObject.Raw, oldCRD); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old CRD: %w", err))
	}
	if err := json.Unmarshal(req.Object.Raw, newCRD); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the new CRD: %w", err))
	}
	owner, owned := ownerOf(oldCRD)
	if !owned {
		owner, owned = ownerOf(newCRD)
	}
	if !owned || equality.Semantic.DeepEqual(oldCRD.Spec, newCRD.Spec) {
		return admission.Allowed("")
	}

	var warnings []string
	if owner != "" {
		bd := &rukpakv1alpha1.BundleDeployment{}
		switch err := c.BundleDeployments.Get(ctx, client.ObjectKey{Name: owner}, bd); {
		case err == nil && bd.Annotations[rukpakv1alpha1.AnnotationSkipCRDUpgradePreflight] == "true":
			return admission.Allowed("").WithWarnings(fmt.Sprintf("CRD %s was not checked against its existing objects: BundleDeployment %q has %s=true",
				newCRD.Name, owner, rukpakv1alpha1.AnnotationSkipCRDUpgradePreflight))
		case err != nil && !apierrors.IsNotFound(err):
			// Checked anyway: only the opt-out is unknown.
			warnings = append(warnings, fmt.Sprintf("could not read BundleDeployment %q for its %s annotation: %v", owner, rukpakv1alpha1.AnnotationSkipCRDUpgradePreflight, err))
		}
	}

	r, err := crdupgrade.Compare(ctx, c.Objects, oldCRD, newCRD, c.Options)
	switch {
	case crdupgrade.IsBudget(err):
		// As the preflight: objects beyond the bounds fail the check.
		return admission.Denied(fmt.Sprintf("CRD upgrade preflight for CRD %s could not finish within its bounds: %v", newCRD.Name, err)).
			WithWarnings(append(warnings, c.skipHint(owner))...)
	case apierrors.IsForbidden(err):
		return admission.Allowed("").WithWarnings(append(warnings, fmt.Sprintf(
			"CRD %s was not checked against its existing objects: the webhook may not list them. The provisioner grants it list on them in ClusterRole %s, bound to the webhook's ServiceAccount by the ClusterRoleBinding of that name: check that both exist and a provisioner runs (%v)",
			newCRD.Name, c.clusterRole(), err))...)
	case err != nil:
		return admission.Allowed("").WithWarnings(append(warnings, fmt.Sprintf("CRD %s was not checked against its existing objects: %v", newCRD.Name, err))...)
	}
	if msg := crdupgrade.Message([]*crdupgrade.Report{r}); msg != "" {
		return admission.Denied(msg).WithWarnings(append(warnings, c.skipHint(owner))...)
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

func (c *CRDCheck) clusterRole() string {
	if c.ClusterRole == "" {
		return DefaultCRDCheckClusterRole
	}
	return c.ClusterRole
}

func (c *CRDCheck) skipHint(owner string) string {
	return fmt.Sprintf("To apply it anyway, annotate BundleDeployment %q with %s=true (it takes the verb %s on it)",
		owner, rukpakv1alpha1.AnnotationSkipCRDUpgradePreflight, VerbSkipCRDUpgradePreflight)
}

// ownerOf returns the BundleDeployment crd's owner labels name.
func ownerOf(crd *apiextensionsv1.CustomResourceDefinition) (string, bool) {
	l := crd.Labels
	if l[rukpakv1alpha1.LabelOwnerKind] != "BundleDeployment" {
		return "", false
	}
	return l[rukpakv1alpha1.LabelOwnerName], true
}
