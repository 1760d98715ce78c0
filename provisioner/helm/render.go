package helm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
)

// RenderOptions say what an install is rendered for.
type RenderOptions struct {
	// ReleaseName is the release's name: a BundleDeployment's name.
	ReleaseName string
	// Namespace is the release's namespace (spec.config.installNamespace).
	Namespace string
	// KubeVersion and APIVersions are the cluster's capabilities; unset,
	// Helm's defaults (as `helm template`).
	KubeVersion *chartutil.KubeVersion
	APIVersions []string
	// Limits bound running the templates; unset fields take
	// DefaultSandboxLimits.
	Limits SandboxLimits
}

// Rendered is what installing a chart applies.
type Rendered struct {
	// CRDs are the files of crds/ directories (the chart's and its
	// subcharts'), applied first, never templated.
	CRDs []chart.CRD
	// Release holds the rendered manifest (Helm's install order) and
	// hooks.
	Release *release.Release
}

// Render renders ch with vals as an install does, with Helm's own install
// action in client-only dry-run mode (`helm template`): the same value
// coalescing, values.schema.json validation, dependency conditions and
// engine as the provisioner's installs, which run that action for real.
// The templates run, and the values are checked against the schemas
// (validateValues: $refs to the chart's own files only), in a bounded
// child process (Freeze, within opts.Limits);
// without a cluster, `lookup` finds nothing. (rukpakctl render prints
// this; installs do not call it, they run action.Install themselves.)
func Render(ctx context.Context, ch *chart.Chart, vals map[string]any, opts RenderOptions) (*Rendered, error) {
	// The install action checks the name before anything is rendered.
	if err := chartutil.ValidateReleaseName(opts.ReleaseName); err != nil {
		return nil, fmt.Errorf("rendering chart %q: release name %q: %w", ch.Name(), opts.ReleaseName, err)
	}
	// The capabilities of a client-only install (action.Install).
	caps := chartutil.DefaultCapabilities.Copy()
	if opts.KubeVersion != nil {
		caps.KubeVersion = *opts.KubeVersion
	}
	caps.APIVersions = append(caps.APIVersions, opts.APIVersions...)
	if vals == nil {
		vals = map[string]any{}
	}
	resp, err := renderSandboxed(ctx, ch, vals, FreezeInput{
		Release:      chartutil.ReleaseOptions{Name: opts.ReleaseName, Namespace: opts.Namespace, Revision: 1, IsInstall: true},
		Capabilities: caps,
	}, opts.Limits.OrDefault())
	var over limitError
	switch {
	case errors.As(err, &over):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("rendering chart %q: %w", ch.Name(), err)
	}
	// What the install action applies: the frozen text, installed for
	// these capabilities (a client-only install's).
	a := &Action{Install: true, Namespace: opts.Namespace, files: resp.Files,
		Capabilities: &chartutil.Capabilities{KubeVersion: caps.KubeVersion, APIVersions: opts.APIVersions}}
	return a.DryRun(ctx, ch, vals, opts.ReleaseName)
}

// installEvents are the hook events an install runs, in order, around the
// manifest.
var installEvents = []release.HookEvent{release.HookPreInstall, release.HookPostInstall}

// Write writes what an install applies, in the order it applies it: CRDs,
// pre-install hooks, the manifest, post-install hooks (hooks of one event by
// weight, then name, as Helm runs them; a hook of both events appears
// twice, as it is applied twice). Hooks that do not run on install follow.
// Every hook document is preceded by a line
// "# hook: <events>, weight <n>, delete policy <policies>".
func (r *Rendered) Write(w io.Writer) error {
	var b strings.Builder
	for _, crd := range r.CRDs {
		// Helm's own rendering of a CRD in a manifest (IncludeCRDs).
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", crd.Filename, crd.File.Data)
	}
	writeHooks(&b, hooksOf(r.Release.Hooks, release.HookPreInstall), string(release.HookPreInstall))
	b.WriteString(r.Release.Manifest)
	writeHooks(&b, hooksOf(r.Release.Hooks, release.HookPostInstall), string(release.HookPostInstall))
	var other []*release.Hook
	for _, h := range r.Release.Hooks {
		if !slices.ContainsFunc(h.Events, func(e release.HookEvent) bool { return slices.Contains(installEvents, e) }) {
			other = append(other, h)
		}
	}
	sortHooks(other)
	for _, h := range other {
		writeHook(&b, h, joinEvents(h.Events))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// hooksOf are the hooks of event in the order Helm runs them.
func hooksOf(hooks []*release.Hook, event release.HookEvent) []*release.Hook {
	var of []*release.Hook
	for _, h := range hooks {
		if slices.Contains(h.Events, event) {
			of = append(of, h)
		}
	}
	sortHooks(of)
	return of
}

// sortHooks orders hooks as Helm's execHook does: by weight, then name,
// keeping the kind order they were rendered in otherwise.
func sortHooks(hooks []*release.Hook) {
	sort.SliceStable(hooks, func(i, j int) bool {
		if hooks[i].Weight != hooks[j].Weight {
			return hooks[i].Weight < hooks[j].Weight
		}
		return hooks[i].Name < hooks[j].Name
	})
}

func writeHooks(b *strings.Builder, hooks []*release.Hook, event string) {
	for _, h := range hooks {
		writeHook(b, h, event)
	}
}

func writeHook(b *strings.Builder, h *release.Hook, events string) {
	policies := make([]string, 0, len(h.DeletePolicies))
	for _, p := range h.DeletePolicies {
		policies = append(policies, string(p))
	}
	if len(policies) == 0 {
		// Helm's default (execHook).
		policies = append(policies, string(release.HookBeforeHookCreation))
	}
	fmt.Fprintf(b, "---\n# hook: %s, weight %d, delete policy %s\n# Source: %s\n%s\n", events, h.Weight, strings.Join(policies, ","), h.Path, strings.TrimSpace(h.Manifest))
}

func joinEvents(events []release.HookEvent) string {
	s := make([]string, 0, len(events))
	for _, e := range events {
		s = append(s, string(e))
	}
	return strings.Join(s, ",")
}
