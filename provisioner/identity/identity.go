// Package identity installs a BundleDeployment's objects as the
// ServiceAccount it names (spec.serviceAccount) instead of as the
// provisioner: it resolves which identity applies (Policy), builds
// impersonating clients (Clients), and checks before anything is applied
// that the identity may do everything a bundle needs, including what the
// API server's RBAC escalation rules require for the Roles and bindings a
// bundle creates (Checker).
package identity

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// ServiceAccount names the identity objects are installed with.
type ServiceAccount struct {
	Namespace, Name string
}

func (s ServiceAccount) String() string { return s.Namespace + "/" + s.Name }

// Username is what the API server calls the ServiceAccount, and what the
// provisioner impersonates.
func (s ServiceAccount) Username() string {
	return serviceaccount.MakeUsername(s.Namespace, s.Name)
}

// Groups are the groups the API server puts an impersonated ServiceAccount
// in (no groups are impersonated explicitly), which RBAC bindings may name.
func (s ServiceAccount) Groups() []string {
	return append(serviceaccount.MakeGroupNames(s.Namespace), user.AllAuthenticated)
}

// Parse reads NAMESPACE/NAME, as the provisioner's flag takes it.
func Parse(s string) (ServiceAccount, error) {
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

// Policy is the provisioner's rule for BundleDeployments without
// spec.serviceAccount, as Flux's --default-service-account: with a Default
// they install as it; with Required and no Default they are refused;
// otherwise they install as the provisioner itself, as before identities
// existed.
type Policy struct {
	Default  *ServiceAccount
	Required bool
}

// ErrRequired is the message of a BundleDeployment refused for naming no
// identity.
const ErrRequired = "this provisioner installs only as a ServiceAccount (--require-service-account): set spec.serviceAccount.name and spec.serviceAccount.namespace to one allowed to create the bundle's objects (`rukpakctl rbac` prints the rules it needs)"

// For returns the identity bd installs with; ok is false for the
// provisioner's own, and err (ErrRequired) when the policy refuses bd.
func (p Policy) For(bd *rukpakv1alpha1.BundleDeployment) (sa ServiceAccount, ok bool, err error) {
	switch {
	case bd.Spec.ServiceAccount != nil:
		return ServiceAccount{Namespace: bd.Spec.ServiceAccount.Namespace, Name: bd.Spec.ServiceAccount.Name}, true, nil
	case p.Default != nil:
		return *p.Default, true, nil
	case p.Required:
		return ServiceAccount{}, false, fmt.Errorf("%s", ErrRequired)
	}
	return ServiceAccount{}, false, nil
}
