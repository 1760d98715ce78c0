package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// The delegation model: the provisioner installs a BundleDeployment as a
// ServiceAccount on its author's behalf, so every write that decides what
// is installed or as whom is acting as that ServiceAccount and takes what
// `kubectl --as=system:serviceaccount:NS:NAME` takes, impersonate on it,
// asked of the API server with a SubjectAccessReview for the requesting
// user. Without it anyone who may update a BundleDeployment could install
// their content with the rights of whichever ServiceAccount another user's
// BundleDeployment names; with it (and a provisioner run with
// --require-service-account, or a --default-service-account of few
// rights) creating and editing BundleDeployments grants no more than the
// ServiceAccounts one may impersonate.

// Verbs on bundledeployments (resource name: the BundleDeployment's) that
// the steering annotations and label take beyond update/patch, as
// approving a CertificateSigningRequest takes approve on signers.
const (
	// VerbApprove lets a user set core.rukpak.io/approved-bundle (approve
	// a waiting pivot or values change) and switch spec.upgradeApproval
	// away from Manual.
	VerbApprove = "approve"
	// VerbSkipCRDUpgradePreflight lets a user set
	// core.rukpak.io/skip-crd-upgrade-preflight.
	VerbSkipCRDUpgradePreflight = "skip-crd-upgrade-preflight"
	// VerbShard lets a user change the shard label of an existing
	// BundleDeployment (move it to another provisioner instance).
	VerbShard = "shard"
)

// shardLabel is the label the shipped sharding overlay selects provisioner
// instances by (provisioner/shard.Label).
const shardLabel = "core.rukpak.io/shard"

// ServiceAccount names a ServiceAccount.
type ServiceAccount struct {
	Namespace, Name string
}

func (s ServiceAccount) String() string { return s.Namespace + "/" + s.Name }

// ParseServiceAccount reads NAMESPACE/NAME, as the provisioner's
// --default-service-account takes it.
func ParseServiceAccount(s string) (ServiceAccount, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" {
		return ServiceAccount{}, fmt.Errorf("service account %q: want NAMESPACE/NAME", s)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return ServiceAccount{}, fmt.Errorf("service account %q: namespace: %s", s, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return ServiceAccount{}, fmt.Errorf("service account %q: name: %s", s, strings.Join(errs, "; "))
	}
	return ServiceAccount{Namespace: ns, Name: name}, nil
}

// Delegation is what the webhook must know of the provisioner to tell whom
// a BundleDeployment without spec.serviceAccount installs as.
type Delegation struct {
	// Default is the provisioner's --default-service-account; nil if it
	// has none.
	Default *ServiceAccount
	// Provisioner is the provisioner's own ServiceAccount. Installing as
	// the provisioner (no spec.serviceAccount and no default) takes
	// impersonate on it: a right only cluster-admins hold, as installing
	// with the provisioner's rights is a cluster-admin's act. The
	// provisioner's own writes (core.rukpak.io/creating-bundle) take it
	// too. Empty: nobody but users allowed every verb on every
	// ServiceAccount may install as the provisioner.
	Provisioner ServiceAccount
}

// steering is what of a BundleDeployment decides what is installed or as
// whom, beyond its sources: everything an edit must be reviewed for.
type steering struct {
	spec                                     rukpakv1alpha1.BundleDeploymentSpec
	approved, skipPreflight, creating, shard *string
}

func steeringOf(bd *rukpakv1alpha1.BundleDeployment) steering {
	s := steering{spec: bd.Spec}
	// Pausing decides when, not what or as whom: whoever may update a
	// BundleDeployment may pause and resume it.
	s.spec.Paused = false
	get := func(m map[string]string, k string) *string {
		if v, ok := m[k]; ok {
			return &v
		}
		return nil
	}
	s.approved = get(bd.Annotations, rukpakv1alpha1.AnnotationApprovedBundle)
	s.skipPreflight = get(bd.Annotations, rukpakv1alpha1.AnnotationSkipCRDUpgradePreflight)
	s.creating = get(bd.Annotations, rukpakv1alpha1.AnnotationCreatingBundle)
	s.shard = get(bd.Labels, shardLabel)
	return s
}

// set says whether p is present and not what it was (o).
func set(o, p *string) bool { return p != nil && (o == nil || *o != *p) }

// changed says whether p differs from o (added, changed or removed).
func changed(o, p *string) bool { return (o == nil) != (p == nil) || (o != nil && *o != *p) }

var (
	annotationsPath = field.NewPath("metadata", "annotations")
	labelsPath      = field.NewPath("metadata", "labels")
)

// checkDelegation reviews a create (oldBD nil) or an update of newBD for
// the requesting user: impersonate on the identity newBD installs as,
// whenever anything steering what is installed or as whom is new, and the
// verb each steering annotation or label takes when it is set. An update
// that changes none of it (finalizers, other labels and annotations,
// spec.paused) is not reviewed.
func (v *BundleDeploymentValidator) checkDelegation(ctx context.Context, oldBD, newBD *rukpakv1alpha1.BundleDeployment) field.ErrorList {
	if v.Sources == nil || v.Sources.Reviewer == nil {
		return nil
	}
	n := steeringOf(newBD)
	var o steering
	if oldBD != nil {
		o = steeringOf(oldBD)
		if equalSteering(o, n) {
			return nil
		}
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return field.ErrorList{field.InternalError(serviceAccountPath, errors.New("no admission request to check access with"))}
	}
	r := &reviews{v: v.Sources, user: req.UserInfo, answers: map[authorizationv1.ResourceAttributes]bool{}}

	var errs field.ErrorList
	sa, why := v.installsAs(newBD)
	if ok, err := r.may(ctx, impersonateSA(sa)); err != nil {
		return field.ErrorList{field.InternalError(serviceAccountPath, err)}
	} else if !ok {
		errs = append(errs, field.Forbidden(serviceAccountPath, fmt.Sprintf("user %q may not impersonate ServiceAccount %s, which the provisioner would install as%s", r.user.Username, sa, why)))
	}

	onBD := func(verb string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Group: rukpakv1alpha1.GroupVersion.Group, Resource: "bundledeployments", Name: newBD.Name, Verb: verb}
	}
	checks := []struct {
		when  bool
		path  *field.Path
		attrs authorizationv1.ResourceAttributes
		what  string
	}{
		{set(o.approved, n.approved), annotationsPath.Key(rukpakv1alpha1.AnnotationApprovedBundle), onBD(VerbApprove),
			fmt.Sprintf("approving takes %s on bundledeployments %q", VerbApprove, newBD.Name)},
		{oldBD != nil && o.spec.UpgradeApproval == rukpakv1alpha1.UpgradeApprovalManual && n.spec.UpgradeApproval != rukpakv1alpha1.UpgradeApprovalManual,
			field.NewPath("spec", "upgradeApproval"), onBD(VerbApprove),
			fmt.Sprintf("leaving Manual approves what waits: it takes %s on bundledeployments %q", VerbApprove, newBD.Name)},
		{set(o.skipPreflight, n.skipPreflight), annotationsPath.Key(rukpakv1alpha1.AnnotationSkipCRDUpgradePreflight), onBD(VerbSkipCRDUpgradePreflight),
			fmt.Sprintf("skipping the CRD upgrade preflight takes %s on bundledeployments %q", VerbSkipCRDUpgradePreflight, newBD.Name)},
		{oldBD != nil && changed(o.shard, n.shard), labelsPath.Key(shardLabel), onBD(VerbShard),
			fmt.Sprintf("moving it to another shard takes %s on bundledeployments %q", VerbShard, newBD.Name)},
		{changed(o.creating, n.creating), annotationsPath.Key(rukpakv1alpha1.AnnotationCreatingBundle), impersonateSA(v.Delegation.Provisioner),
			fmt.Sprintf("only the provisioner writes it (it takes impersonate on ServiceAccount %s)", v.Delegation.Provisioner)},
	}
	for _, c := range checks {
		if !c.when {
			continue
		}
		ok, err := r.may(ctx, c.attrs)
		if err != nil {
			return field.ErrorList{field.InternalError(c.path, err)}
		}
		if !ok {
			errs = append(errs, field.Forbidden(c.path, fmt.Sprintf("user %q may not set it: %s", r.user.Username, c.what)))
		}
	}
	return errs
}

var serviceAccountPath = field.NewPath("spec", "serviceAccount")

// installsAs is the identity bd installs as, as the provisioner decides it
// (provisioner/identity.Policy), and how it was chosen when bd names none.
func (v *BundleDeploymentValidator) installsAs(bd *rukpakv1alpha1.BundleDeployment) (sa ServiceAccount, why string) {
	switch {
	case bd.Spec.ServiceAccount != nil:
		return ServiceAccount{Namespace: bd.Spec.ServiceAccount.Namespace, Name: bd.Spec.ServiceAccount.Name}, ""
	case v.Delegation.Default != nil:
		return *v.Delegation.Default, " (its --default-service-account: the BundleDeployment names no spec.serviceAccount)"
	}
	return v.Delegation.Provisioner, " (its own: the BundleDeployment names no spec.serviceAccount and the provisioner has no --default-service-account)"
}

func equalSteering(a, b steering) bool {
	return !changed(a.approved, b.approved) && !changed(a.skipPreflight, b.skipPreflight) &&
		!changed(a.creating, b.creating) && !changed(a.shard, b.shard) && equalSpec(a.spec, b.spec)
}

func impersonateSA(sa ServiceAccount) authorizationv1.ResourceAttributes {
	return authorizationv1.ResourceAttributes{Namespace: sa.Namespace, Verb: "impersonate", Resource: "serviceaccounts", Name: sa.Name}
}

// reviews asks the API server what one user may do, each question once.
type reviews struct {
	v       *SourceValidator
	user    authenticationv1.UserInfo
	answers map[authorizationv1.ResourceAttributes]bool
}

func (r *reviews) may(ctx context.Context, attrs authorizationv1.ResourceAttributes) (bool, error) {
	if ok, seen := r.answers[attrs]; seen {
		return ok, nil
	}
	a := attrs
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &a,
		User:               r.user.Username,
		UID:                r.user.UID,
		Groups:             r.user.Groups,
		Extra:              extra(r.user.Extra),
	}}
	if err := r.v.Reviewer.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("reviewing whether user %q may %s %s %s/%s: %w", r.user.Username, attrs.Verb, attrs.Resource, attrs.Namespace, attrs.Name, err)
	}
	ok := sar.Status.Allowed && !sar.Status.Denied
	r.answers[attrs] = ok
	return ok, nil
}
