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
	// revision + 1, as action.Upgrade numbers it. (Upgrades reset values,
	// action.Upgrade's ResetValues: the previous revision's values are not
	// rendered with.)
	Last, Deployed *release.Release
	// Lookup guards what a chart's lookups read; User, when set, is the
	// user name they read as (impersonated, as the install acts).
	Lookup *LookupGuard
	User   string
	// Owner and Slow are FreezeInput's: whose render it is (a release;
	// "" for nobody's) and what is called when it goes to the slow lane.
	Owner string
	Slow  func()
}

// Upgrade says whether the action is an upgrade.
func (in ActionInput) Upgrade() bool { return in.Deployed != nil }

// Action is a chart frozen (Freeze) for one install or upgrade: the
// templates' text as the child rendered them, once, with the action's
// .Release, the cluster's capabilities and lookups as the action's
// identity. The checks before the action (DryRun) and the action itself
// (Chart, with Capabilities on its configuration) both use that text, so
// what is checked is what is applied.
type Action struct {
	// Capabilities are what the child rendered with: set them as the
	// action configuration's Capabilities.
	Capabilities *chartutil.Capabilities
	// Install is true for an install (revision 1, crds/ first), false for
	// an upgrade.
	Install bool
	// Namespace is the release's namespace the templates rendered for.
	Namespace string

	files map[string]string
	size  int64
}

// Size is the rendered text's size in bytes.
func (a *Action) Size() int64 { return a.size }

// Chart returns ch with every template replaced by the text it rendered
// to; ch must be the chart the Action was prepared from (or one with the
// same content). Each call returns a new copy: Helm's actions change the
// chart they run (dependencies processed, values imported).
func (a *Action) Chart(ch *chart.Chart) *chart.Chart { return frozen(ch, a.files) }

// PrepareAction freezes ch (Freeze) for the install or upgrade in describes,
// rendering for the cluster getter reaches: caps (nil: discovery's, as
// Capabilities returns them with no CRDs) and its REST config for
// lookups, as in.User when set.
func PrepareAction(ctx context.Context, getter action.RESTClientGetter, caps *chartutil.Capabilities, ch *chart.Chart, vals map[string]any, in ActionInput, limits SandboxLimits) (*Action, error) {
	if caps == nil {
		dc, err := getter.ToDiscoveryClient()
		if err != nil {
			return nil, fmt.Errorf("creating a discovery client: %w", err)
		}
		if caps, err = Capabilities(dc, nil); err != nil {
			return nil, err
		}
	}
	rest, err := getter.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("getting the REST config: %w", err)
	}
	if in.User != "" {
		rest.Impersonate = restclient.ImpersonationConfig{UserName: in.User}
	}
	fin := FreezeInput{Capabilities: caps, RESTConfig: rest, Lookup: in.Lookup, Owner: in.Owner, Slow: in.Slow}
	ns := in.Namespace
	if !in.Upgrade() {
		fin.Release = chartutil.ReleaseOptions{Name: in.Release, Namespace: ns, Revision: 1, IsInstall: true}
		fin.InstallCRDs = true
	} else {
		last := in.Last
		if last == nil {
			last = in.Deployed
		}
		ns = in.Deployed.Namespace
		fin.Release = chartutil.ReleaseOptions{Name: in.Release, Namespace: ns, Revision: last.Version + 1, IsUpgrade: true}
	}
	resp, err := renderSandboxed(ctx, ch, vals, fin, limits.OrDefault())
	if err != nil {
		return nil, err
	}
	a := &Action{Capabilities: resp.Capabilities, Install: !in.Upgrade(), Namespace: ns, files: resp.Files}
	for _, s := range resp.Files {
		a.size += int64(len(s))
	}
	return a, nil
}

// FreezeForAction freezes ch for the install or upgrade that cfg is about
// to run (PrepareAction, with cfg's getter) and sets cfg.Capabilities to
// what the child rendered with, so the action checks the chart against the
// same cluster. Run the action with the returned chart.
func FreezeForAction(ctx context.Context, cfg *action.Configuration, ch *chart.Chart, vals map[string]any, in ActionInput, limits SandboxLimits) (*chart.Chart, error) {
	a, err := PrepareAction(ctx, cfg.RESTClientGetter, nil, ch, vals, in, limits)
	if err != nil {
		return nil, err
	}
	cfg.Capabilities = a.Capabilities
	return a.Chart(ch), nil
}

// DryRun is what the action applies, applying nothing: Helm's install
// action in client-only dry-run mode (`helm template`) run on the frozen
// chart, which renders nothing anew, so the manifest (in Helm's install
// order) and hooks are the text the action will apply, whatever .Release,
// lookups or randomness the templates used; CRDs are the crds/ an install
// creates first (of the chart and the subcharts vals enable), none for an
// upgrade.
func (a *Action) DryRun(ctx context.Context, ch *chart.Chart, vals map[string]any, releaseName string) (*Rendered, error) {
	fc := a.Chart(ch)
	if vals == nil {
		vals = map[string]any{}
	}
	act := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	act.DryRun = true
	act.ClientOnly = true
	act.Replace = true
	act.ReleaseName = releaseName
	act.Namespace = a.Namespace
	// The child validated the values (validateValues); the frozen chart
	// has no schema left to validate against.
	act.SkipSchemaValidation = true
	if a.Capabilities != nil {
		kv := a.Capabilities.KubeVersion
		act.KubeVersion = &kv
		act.APIVersions = a.Capabilities.APIVersions
	}
	rel, err := act.RunWithContext(ctx, fc, vals)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %q: %w", ch.Name(), err)
	}
	r := &Rendered{Release: rel}
	if a.Install {
		// The action processed fc's dependencies: the enabled charts'.
		r.CRDs = fc.CRDObjects()
	}
	return r, nil
}
