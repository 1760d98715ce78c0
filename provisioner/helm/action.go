package helm

import (
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	restclient "k8s.io/client-go/rest"
)

// ActionInput says which Helm action a chart is frozen for.
type ActionInput struct {
	// Release is the release's name; Namespace the install namespace.
	Release, Namespace string
	// Last is the release's newest record and Deployed its deployed one:
	// with no Deployed, the action is an install (revision 1, crds/
	// created first), else an upgrade of Deployed's namespace to Last's
	// revision + 1, as action.Upgrade numbers it.
	Last, Deployed *release.Release
	// Lookup guards what a chart's lookups read; User, when set, is the
	// user name they read as (impersonated, as the install acts).
	Lookup *LookupGuard
	User   string
}

// FreezeForAction freezes ch (Freeze) for the install or upgrade that cfg
// is about to run, rendering for the cluster cfg reaches (its capabilities
// from discovery, its REST config for lookups), and sets cfg.Capabilities
// to what the child rendered with, so the action checks the chart against
// the same cluster. Run the action with the returned chart.
func FreezeForAction(ctx context.Context, cfg *action.Configuration, ch *chart.Chart, vals map[string]any, in ActionInput, limits SandboxLimits) (*chart.Chart, error) {
	dc, err := cfg.RESTClientGetter.ToDiscoveryClient()
	if err != nil {
		return nil, fmt.Errorf("creating a discovery client: %w", err)
	}
	caps, err := Capabilities(dc, nil)
	if err != nil {
		return nil, err
	}
	rest, err := cfg.RESTClientGetter.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("getting the REST config: %w", err)
	}
	if in.User != "" {
		rest.Impersonate = restclient.ImpersonationConfig{UserName: in.User}
	}
	fin := FreezeInput{Capabilities: caps, RESTConfig: rest, Lookup: in.Lookup}
	if in.Deployed == nil {
		fin.Release = chartutil.ReleaseOptions{Name: in.Release, Namespace: in.Namespace, Revision: 1, IsInstall: true}
		fin.InstallCRDs = true
	} else {
		last := in.Last
		if last == nil {
			last = in.Deployed
		}
		fin.Release = chartutil.ReleaseOptions{Name: in.Release, Namespace: in.Deployed.Namespace, Revision: last.Version + 1, IsUpgrade: true}
	}
	frozen, used, err := freeze(ctx, ch, vals, fin, limits)
	if err != nil {
		return nil, err
	}
	cfg.Capabilities = used
	return frozen, nil
}
