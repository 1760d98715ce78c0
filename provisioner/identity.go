package provisioner

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/rukpak-dev/rukpak/internal/liststream"
	"github.com/rukpak-dev/rukpak/provisioner/bundledeployment"
	"github.com/rukpak-dev/rukpak/provisioner/identity"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// newIdentity lets BundleDeployments install as a ServiceAccount: the one
// they name, else opts' default; with neither, as the provisioner unless
// opts require one.
func newIdentity(mgr ctrl.Manager, releases *release.Manager, opts Options) (*bundledeployment.Identity, error) {
	// The release manager's mapper: it is reset when a bundle's CRDs are
	// established, so the check maps what the apply will.
	mapper := releases.Client().RESTMapper()
	clients, err := identity.NewClients(mgr.GetConfig(), mapper, 0)
	if err != nil {
		return nil, err
	}
	lists, err := liststream.New(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, err
	}
	return &bundledeployment.Identity{
		Policy:  identity.Policy{Default: opts.DefaultServiceAccount, Required: opts.RequireServiceAccount},
		Clients: clients,
		Checker: &identity.Checker{Mapper: mapper, RBAC: mgr.GetAPIReader(), Lists: lists},
	}, nil
}
