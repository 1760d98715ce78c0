package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	bsemver "github.com/blang/semver/v4"
	"github.com/spf13/cobra"

	"github.com/rukpak-dev/rukpak/catalog/fbc"
	"github.com/rukpak-dev/rukpak/catalog/resolve"
)

// catalogOptions are the flags every catalog subcommand shares.
type catalogOptions struct {
	source  catalogSourceOptions
	output  string
	timeout time.Duration
}

func newCatalogCmd() *cobra.Command {
	var o catalogOptions
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "List and resolve from file-based catalogs",
		Long: `Catalog reads file-based catalogs (FBC) as the provisioner does: validated
with the same rules and limits, resolved with the same resolver.

A SOURCE is one of:
  DIR           a catalog directory (its configs/ directory when it has one)
  image:REF     an FBC image, pulled and unpacked as a Catalog's image is
                (--ca-file, --insecure-skip-tls-verify, the unpack limits)
  catalog/NAME  a Catalog on the cluster, read from the provisioner's
                content service at its status.contentURL

A Catalog is read with a token of a ServiceAccount bound to the
catalog-reader ClusterRole, obtained with your kubeconfig identity: by
default rukpakctl creates a temporary one in --namespace and removes it
afterwards (that takes the rights to create ServiceAccounts, their tokens
and ClusterRoleBindings of catalog-reader); --service-account NS/NAME uses
an existing one. When the content service is a cluster Service, forward a
port to it and pass --content-url and --tls-server-name, as for rukpakctl
content. Write ./catalog/x for a directory named catalog/x.`,
	}
	f := cmd.PersistentFlags()
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	f.DurationVar(&o.timeout, "timeout", 5*time.Minute, "deadline of the whole command (fetches included)")
	f.StringVar(&o.source.image.caFile, "ca-file", "", "image:REF: PEM CA certificates trusted for the registry, besides the system's")
	f.BoolVar(&o.source.image.insecure, "insecure-skip-tls-verify", false, "image:REF: do not verify the registry's certificate")
	co := &o.source.content
	f.StringVar(&co.kubeconfig, "kubeconfig", "", "catalog/NAME: kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else in-cluster)")
	f.StringVarP(&co.namespace, "namespace", "n", "rukpak-system", "catalog/NAME: the provisioner's namespace")
	f.StringVar(&co.contentURL, "content-url", "", "catalog/NAME: base URL of the content service (default: the one in the Catalog's status.contentURL)")
	f.StringVar(&co.caFile, "content-ca-file", "", "catalog/NAME: PEM file of the CA the content service's certificate is verified with")
	f.StringVar(&co.caSecret, "content-ca-secret", "rukpak-core-tls", "catalog/NAME: Secret in --namespace whose ca.crt verifies the content service (when --content-ca-file is not set)")
	f.StringVar(&co.serverName, "tls-server-name", "", "catalog/NAME: host name the content service's certificate must be valid for (default: the host of the URL)")
	f.StringVar(&co.serviceAccount, "service-account", "", "catalog/NAME: NAMESPACE/NAME of an existing ServiceAccount bound to catalog-reader (default: a temporary one)")
	// The provisioner's limit flags, with its defaults: a catalog reads
	// here exactly when a provisioner with the same flags would serve it.
	set := flag.NewFlagSet("limits", flag.ContinueOnError)
	o.source.unpackLimits.BindFlags(set)
	o.source.fbcLimits.BindFlags(set)
	f.AddGoFlagSet(set)

	cmd.AddCommand(newCatalogListCmd(&o), newCatalogResolveCmd(&o))
	return cmd
}

// start checks the output flag and opens sources under the deadline;
// done releases everything.
func (o *catalogOptions) start(ctx context.Context, sources []string) ([]*openedCatalog, context.Context, func(), error) {
	if o.output != "table" && o.output != "json" {
		return nil, nil, nil, fmt.Errorf("--output %q: want table or json", o.output)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	op := &catalogOpener{o: o.source}
	done := func() { op.close(); cancel() }
	cats, err := op.openAll(ctx, sources)
	if err != nil {
		done()
		return nil, nil, nil, err
	}
	return cats, ctx, done, nil
}

func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// compareVersions orders catalog versions by semver (as OLM compares
// them), unparsable ones last by text.
func compareVersions(a, b string) int {
	va, ea := bsemver.ParseTolerant(a)
	vb, eb := bsemver.ParseTolerant(b)
	switch {
	case ea == nil && eb == nil:
		if c := va.Compare(vb); c != 0 {
			return c
		}
	case ea == nil:
		return -1
	case eb == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// --- list ---

type packageSummary struct {
	Name           string `json:"name"`
	DefaultChannel string `json:"defaultChannel,omitempty"`
	Channels       int    `json:"channels"`
	Bundles        int    `json:"bundles"`
	LatestVersion  string `json:"latestVersion,omitempty"`
}

type catalogSummary struct {
	Catalog  string           `json:"catalog"`
	Kind     string           `json:"kind"`
	Priority int32            `json:"priority"`
	Digest   string           `json:"digest"`
	Packages []packageSummary `json:"packages"`
}

type channelDetail struct {
	Name string `json:"name"`
	// Heads are the entries no other entry of the channel replaces or
	// skips: what a new install of the channel gets (one, in a valid
	// catalog).
	Heads       []string      `json:"heads"`
	Entries     []entryDetail `json:"entries"`
	Deprecation *string       `json:"deprecation,omitempty"`
}

type entryDetail struct {
	Name      string   `json:"name"`
	Version   string   `json:"version"`
	Replaces  string   `json:"replaces,omitempty"`
	Skips     []string `json:"skips,omitempty"`
	SkipRange string   `json:"skipRange,omitempty"`
}

type deprecationDetail struct {
	Schema  string `json:"schema"`
	Name    string `json:"name,omitempty"`
	Message string `json:"message"`
}

type packageDetail struct {
	Catalog        string              `json:"catalog"`
	Name           string              `json:"name"`
	DefaultChannel string              `json:"defaultChannel,omitempty"`
	Channels       []channelDetail     `json:"channels"`
	Bundles        int                 `json:"bundles"`
	Deprecations   []deprecationDetail `json:"deprecations,omitempty"`
}

func newCatalogListCmd(o *catalogOptions) *cobra.Command {
	var pkg string
	cmd := &cobra.Command{
		Use:   "list SOURCE",
		Short: "List the packages of a catalog, or the channels of one package",
		Long: `List prints the packages of a catalog with their default channel, number of
channels and bundles and latest version; with --package, that package's
channels with their heads and entries (versions in order) and its
deprecations.`,
		Example: `  rukpakctl catalog list ./my-catalog
  rukpakctl catalog list image:quay.io/operatorhubio/catalog:latest --package kube-green
  rukpakctl catalog list catalog/operatorhubio -o json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("requires 1 argument: SOURCE (a directory, image:REF or catalog/NAME)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.list(cmd.Context(), cmd.OutOrStdout(), args[0], pkg)
		},
	}
	cmd.Flags().StringVar(&pkg, "package", "", "list this package's channels, entries and deprecations")
	return cmd
}

func (o *catalogOptions) list(ctx context.Context, out io.Writer, source, pkg string) error {
	cats, ctx, done, err := o.start(ctx, []string{source})
	if err != nil {
		return err
	}
	defer done()
	c := cats[0]
	if pkg != "" {
		p, err := c.readPackage(ctx, pkg, o.source.fbcLimits)
		if err != nil {
			return err
		}
		d := describePackage(c.name, p)
		if o.output == "json" {
			return writeJSON(out, d)
		}
		return writePackageTable(out, d)
	}
	if err := c.loadAll(ctx, o.source.fbcLimits); err != nil {
		return err
	}
	s := catalogSummary{Catalog: c.name, Kind: c.kind, Priority: c.priority, Digest: c.index.Digest, Packages: []packageSummary{}}
	for _, pi := range c.index.Packages {
		p, err := c.readPackage(ctx, pi.Name, o.source.fbcLimits)
		if err != nil {
			return err
		}
		ps := packageSummary{Name: p.Name, DefaultChannel: p.DefaultChannel, Channels: len(p.Channels), Bundles: len(p.Bundles)}
		for _, b := range p.Bundles {
			if ps.LatestVersion == "" || compareVersions(b.Version, ps.LatestVersion) > 0 {
				ps.LatestVersion = b.Version
			}
		}
		s.Packages = append(s.Packages, ps)
	}
	if o.output == "json" {
		return writeJSON(out, s)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PACKAGE\tDEFAULT CHANNEL\tCHANNELS\tBUNDLES\tLATEST")
	for _, p := range s.Packages {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", p.Name, orNone(p.DefaultChannel), p.Channels, p.Bundles, orNone(p.LatestVersion))
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// describePackage lays out a package's channels: entries in version order
// and the heads of each channel.
func describePackage(catalog string, p *fbc.Package) packageDetail {
	versions := make(map[string]string, len(p.Bundles))
	for _, b := range p.Bundles {
		versions[b.Name] = b.Version
	}
	channelDeps := map[string]string{}
	d := packageDetail{Catalog: catalog, Name: p.Name, DefaultChannel: p.DefaultChannel, Bundles: len(p.Bundles), Channels: []channelDetail{}}
	for _, dep := range p.Deprecations {
		d.Deprecations = append(d.Deprecations, deprecationDetail{Schema: dep.Schema, Name: dep.Name, Message: dep.Message})
		if dep.Schema == fbc.SchemaChannel {
			channelDeps[dep.Name] = dep.Message
		}
	}
	for _, ch := range p.Channels {
		cd := channelDetail{Name: ch.Name, Heads: []string{}, Entries: make([]entryDetail, 0, len(ch.Entries))}
		if m, ok := channelDeps[ch.Name]; ok {
			cd.Deprecation = &m
		}
		followed := map[string]bool{}
		for _, e := range ch.Entries {
			followed[e.Replaces] = true
			for _, s := range e.Skips {
				followed[s] = true
			}
		}
		for _, e := range ch.Entries {
			cd.Entries = append(cd.Entries, entryDetail{Name: e.Name, Version: versions[e.Name], Replaces: e.Replaces, Skips: e.Skips, SkipRange: e.SkipRange})
			if !followed[e.Name] {
				cd.Heads = append(cd.Heads, e.Name)
			}
		}
		slices.SortStableFunc(cd.Entries, func(a, b entryDetail) int {
			if c := compareVersions(a.Version, b.Version); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
		slices.Sort(cd.Heads)
		d.Channels = append(d.Channels, cd)
	}
	slices.SortFunc(d.Channels, func(a, b channelDetail) int { return strings.Compare(a.Name, b.Name) })
	return d
}

func writePackageTable(out io.Writer, d packageDetail) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Package:\t%s\n", d.Name)
	fmt.Fprintf(tw, "Catalog:\t%s\n", d.Catalog)
	fmt.Fprintf(tw, "Default channel:\t%s\n", orNone(d.DefaultChannel))
	fmt.Fprintf(tw, "Bundles:\t%d\n", d.Bundles)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHANNEL\tHEAD\tVERSIONS")
	for _, ch := range d.Channels {
		vs := make([]string, len(ch.Entries))
		for i, e := range ch.Entries {
			vs[i] = orNone(e.Version)
		}
		name := ch.Name
		if ch.Deprecation != nil {
			name += " (deprecated)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, orNone(strings.Join(ch.Heads, ",")), strings.Join(vs, " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(d.Deprecations) == 0 {
		return nil
	}
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DEPRECATED\tNAME\tMESSAGE")
	for _, dep := range d.Deprecations {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", dep.Schema, orNone(dep.Name), oneLine(dep.Message))
	}
	return tw.Flush()
}

// oneLine keeps a catalog's message on its table row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// --- resolve ---

// maxUpgradeSteps bounds the upgrade path, far beyond any real package's
// chain. Each step beats the last by the resolver's order, so a path ends
// on its own; the bound and the repeat check guard against catalogs whose
// priorities and deprecations disagree.
const maxUpgradeSteps = 1000

type resolveFlags struct {
	pkg              string
	versionRange     string
	channels         []string
	policy           string
	installedVersion string
	installedBundle  string
	// installedImage, from a BundleDeployment's status only: the installed
	// bundle is that image too, as the provisioner resolves.
	installedImage string
	// fromBD names a BundleDeployment whose catalog source and installed
	// bundle stand for the flags above.
	fromBD string
}

type resolvedBundle struct {
	Catalog               string                `json:"catalog"`
	Bundle                string                `json:"bundle"`
	Version               string                `json:"version"`
	Image                 string                `json:"image"`
	Channels              []string              `json:"channels"`
	Edge                  resolve.Edge          `json:"edge"`
	Deprecations          []resolvedDeprecation `json:"deprecations,omitempty"`
	Unreachable           []string              `json:"unreachable,omitempty"`
	UnreachableTotal      int                   `json:"unreachableTotal,omitempty"`
	UnreachableIncomplete bool                  `json:"unreachableIncomplete,omitempty"`
	Dependencies          []string              `json:"dependencies,omitempty"`
}

type resolvedDeprecation struct {
	Scope   resolve.DeprecationScope `json:"scope"`
	Name    string                   `json:"name"`
	Message string                   `json:"message"`
}

type upgradeStep struct {
	From        string       `json:"from"`
	FromVersion string       `json:"fromVersion"`
	To          string       `json:"to"`
	ToVersion   string       `json:"toVersion"`
	Edge        resolve.Edge `json:"edge"`
	Catalog     string       `json:"catalog"`
}

type installedBundle struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type resolveOutput struct {
	Package   string           `json:"package"`
	Policy    resolve.Policy   `json:"policy"`
	Installed *installedBundle `json:"installed,omitempty"`
	Resolved  resolvedBundle   `json:"resolved"`
	// UpgradePath is the chain of resolutions from the installed bundle,
	// each taking the previous one's result as installed, up to the
	// bundle that resolves to itself.
	UpgradePath []upgradeStep `json:"upgradePath,omitempty"`
	// PathEnd says why the path stopped when it is not at a fixed point:
	// a cycle or maxUpgradeSteps.
	PathEnd string `json:"pathEnd,omitempty"`
}

func newCatalogResolveCmd(o *catalogOptions) *cobra.Command {
	var f resolveFlags
	cmd := &cobra.Command{
		Use:   "resolve SOURCE... --package P",
		Short: "Print what a catalog source would install, and the upgrade path from an installed version",
		Long: `Resolve picks the bundle a BundleDeployment's catalog source would install,
with the provisioner's resolver: among the SOURCEs together (a Catalog's
spec.priority orders them; directories and images have priority 0), the
highest version in the channels and range that may follow the installed
bundle under the policy. It prints the bundle, the edge that allows it,
deprecations, and the versions in range the installed bundle cannot reach.

With an installed bundle (--installed-version or --installed-bundle, looked
up in the catalogs) it also prints the upgrade path: resolution repeated
with each result as the installed bundle until it stays put, each step
with its edge. A resolution that finds nothing prints the resolver's
message, with what each catalog held, and fails.`,
		Example: `  rukpakctl catalog resolve ./my-catalog --package kube-green --installed-version 0.3.0
  rukpakctl catalog resolve --from-bundledeployment kube-green
  rukpakctl catalog resolve catalog/operatorhubio catalog/mirror --package infinispan \
    --channel 2.3.x --version '>=2.3.0 <2.4.0'`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 && f.fromBD == "" {
				return errors.New("requires at least 1 argument: SOURCE (a directory, image:REF or catalog/NAME), or --from-bundledeployment")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.fromBD != "" {
				for _, name := range resolveFlagsFromBD {
					if cmd.Flags().Changed(name) {
						return fmt.Errorf("--%s: --from-bundledeployment takes it from the BundleDeployment", name)
					}
				}
			}
			return o.resolve(cmd.Context(), cmd.OutOrStdout(), args, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.pkg, "package", "", "the package to resolve (required)")
	fl.StringVar(&f.versionRange, "version", "", "version range (Masterminds semver constraints, as in the source's version); empty: any")
	fl.StringSliceVar(&f.channels, "channel", nil, "channel to take bundles from (repeatable); none: every channel")
	fl.StringVar(&f.policy, "policy", string(resolve.CatalogProvided), "upgrade constraint policy: CatalogProvided or SelfCertified")
	fl.StringVar(&f.installedVersion, "installed-version", "", "version of the installed bundle")
	fl.StringVar(&f.installedBundle, "installed-bundle", "", "name of the installed bundle")
	fl.StringVar(&f.fromBD, "from-bundledeployment", "", "take the package, range, channels, policy and installed bundle from this BundleDeployment's catalog source and status; without SOURCEs, resolve against the serving Catalogs its selector matches")
	return cmd
}

func (o *catalogOptions) resolve(ctx context.Context, out io.Writer, sources []string, f resolveFlags) error {
	if f.fromBD != "" {
		var err error
		if f, sources, err = o.fromBundleDeployment(ctx, f.fromBD, sources); err != nil {
			return err
		}
	}
	if f.pkg == "" {
		return errors.New("--package is required")
	}
	cats, ctx, done, err := o.start(ctx, sources)
	if err != nil {
		return err
	}
	defer done()
	var pkgs []*fbc.Package
	catalogs := make([]resolve.Catalog, 0, len(cats))
	for _, c := range cats {
		p, err := c.readPackage(ctx, f.pkg, o.source.fbcLimits)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			p = nil // the resolver says which catalogs have no such package
		case err != nil:
			return err
		default:
			pkgs = append(pkgs, p)
		}
		idx, err := resolve.NewIndex(resolve.FromPackages(p))
		if err != nil {
			return fmt.Errorf("catalog %q: %w", c.name, err)
		}
		catalogs = append(catalogs, resolve.Catalog{Name: c.name, Priority: c.priority, Index: idx})
	}
	req := resolve.Request{PackageName: f.pkg, Channels: f.channels, VersionRange: f.versionRange, Policy: resolve.Policy(f.policy)}
	if f.installedBundle != "" || f.installedVersion != "" {
		in, err := findInstalled(f, pkgs)
		if err != nil {
			return err
		}
		req.Installed = in
	}
	res, err := upgradePath(req, catalogs)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return writeJSON(out, res)
	}
	return writeResolveTable(out, res)
}

// findInstalled completes the installed bundle from the catalogs: the
// version of --installed-bundle, or the bundle of --installed-version.
func findInstalled(f resolveFlags, pkgs []*fbc.Package) (*resolve.Installed, error) {
	if f.installedBundle != "" && f.installedVersion != "" {
		return &resolve.Installed{Name: f.installedBundle, Version: f.installedVersion, Image: f.installedImage}, nil
	}
	var names []string
	version := ""
	for _, p := range pkgs {
		for _, b := range p.Bundles {
			switch {
			case f.installedBundle != "" && b.Name == f.installedBundle:
				if version != "" && version != b.Version {
					return nil, fmt.Errorf("installed bundle %q has versions %s and %s in different catalogs: pass --installed-version", b.Name, version, b.Version)
				}
				version = b.Version
			case f.installedVersion != "" && sameVersion(b.Version, f.installedVersion) && !slices.Contains(names, b.Name):
				names = append(names, b.Name)
			}
		}
	}
	if f.installedBundle != "" {
		if version == "" {
			return nil, fmt.Errorf("installed bundle %q is not a bundle of package %q in any catalog: pass --installed-version too", f.installedBundle, f.pkg)
		}
		return &resolve.Installed{Name: f.installedBundle, Version: version}, nil
	}
	switch len(names) {
	case 0:
		return nil, fmt.Errorf("no bundle of package %q has version %s in any catalog: pass --installed-bundle too", f.pkg, f.installedVersion)
	case 1:
		return &resolve.Installed{Name: names[0], Version: f.installedVersion}, nil
	}
	slices.Sort(names)
	return nil, fmt.Errorf("bundles %s of package %q all have version %s: pass --installed-bundle", strings.Join(names, ", "), f.pkg, f.installedVersion)
}

func sameVersion(a, b string) bool {
	if a == b {
		return true
	}
	va, ea := bsemver.ParseTolerant(a)
	vb, eb := bsemver.ParseTolerant(b)
	return ea == nil && eb == nil && va.Equals(vb)
}

// upgradePath resolves req and, with a bundle installed, walks on: each
// step resolves with the previous result installed, to the fixed point.
func upgradePath(req resolve.Request, catalogs []resolve.Catalog) (*resolveOutput, error) {
	first, err := resolve.Resolve(req, catalogs)
	if err != nil {
		return nil, err
	}
	out := &resolveOutput{Package: req.PackageName, Policy: req.Policy, Resolved: resolvedOf(first)}
	if out.Policy == "" {
		out.Policy = resolve.CatalogProvided
	}
	if req.Installed == nil {
		return out, nil
	}
	out.Installed = &installedBundle{Name: req.Installed.Name, Version: req.Installed.Version}
	cur, res := *req.Installed, first
	seen := map[string]bool{cur.Name: true}
	for {
		if res.Bundle == cur.Name || res.Edge == resolve.EdgeInstalled {
			return out, nil
		}
		if seen[res.Bundle] {
			out.PathEnd = fmt.Sprintf("cycle: %s leads back to %s", cur.Name, res.Bundle)
			return out, nil
		}
		if len(out.UpgradePath) == maxUpgradeSteps {
			out.PathEnd = fmt.Sprintf("stopped after %d steps", maxUpgradeSteps)
			return out, nil
		}
		seen[res.Bundle] = true
		out.UpgradePath = append(out.UpgradePath, upgradeStep{
			From: cur.Name, FromVersion: cur.Version, To: res.Bundle, ToVersion: res.Version, Edge: res.Edge, Catalog: res.Catalog,
		})
		cur = resolve.Installed{Name: res.Bundle, Version: res.Version}
		next := req
		next.Installed = &cur
		if res, err = resolve.Resolve(next, catalogs); err != nil {
			return nil, fmt.Errorf("upgrade path, step %d from %s: %w", len(out.UpgradePath)+1, cur.Name, err)
		}
	}
}

func resolvedOf(r *resolve.Result) resolvedBundle {
	b := resolvedBundle{
		Catalog: r.Catalog, Bundle: r.Bundle, Version: r.Version, Image: r.Image, Channels: r.Channels, Edge: r.Edge,
		Unreachable: r.Unreachable, UnreachableTotal: r.UnreachableTotal, UnreachableIncomplete: r.UnreachableIncomplete,
		Dependencies: r.Dependencies,
	}
	if b.Channels == nil {
		b.Channels = []string{}
	}
	for _, d := range r.Deprecations {
		b.Deprecations = append(b.Deprecations, resolvedDeprecation{Scope: d.Scope, Name: d.Name, Message: d.Message})
	}
	return b
}

func writeResolveTable(out io.Writer, r *resolveOutput) error {
	b := r.Resolved
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Package:\t%s\n", r.Package)
	if r.Installed != nil {
		fmt.Fprintf(tw, "Installed:\t%s (%s)\n", r.Installed.Name, r.Installed.Version)
	}
	fmt.Fprintf(tw, "Policy:\t%s\n", r.Policy)
	fmt.Fprintf(tw, "Catalog:\t%s\n", b.Catalog)
	fmt.Fprintf(tw, "Bundle:\t%s\n", b.Bundle)
	fmt.Fprintf(tw, "Version:\t%s\n", b.Version)
	fmt.Fprintf(tw, "Image:\t%s\n", b.Image)
	fmt.Fprintf(tw, "Channels:\t%s\n", orNone(strings.Join(b.Channels, ", ")))
	fmt.Fprintf(tw, "Edge:\t%s\n", b.Edge)
	if len(b.Dependencies) > 0 {
		fmt.Fprintf(tw, "Dependencies:\t%s (OLM v1 does not install bundles with dependencies)\n", strings.Join(b.Dependencies, ", "))
	}
	if r.Installed != nil && r.Policy == resolve.CatalogProvided {
		if b.UnreachableTotal == 0 {
			fmt.Fprintf(tw, "Unreachable:\t<none>\n")
		} else {
			more := ""
			if b.UnreachableTotal > len(b.Unreachable) {
				more = fmt.Sprintf(" (%d of %d)", len(b.Unreachable), b.UnreachableTotal)
			}
			if b.UnreachableIncomplete {
				more += " (incomplete: the reachability walk hit its bound)"
			}
			fmt.Fprintf(tw, "Unreachable:\t%s%s\n", strings.Join(b.Unreachable, " "), more)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(b.Deprecations) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DEPRECATED\tNAME\tMESSAGE")
		for _, d := range b.Deprecations {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", d.Scope, d.Name, oneLine(d.Message))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if r.Installed == nil {
		return nil
	}
	fmt.Fprintln(out)
	if len(r.UpgradePath) == 0 {
		fmt.Fprintf(out, "Upgrade path: none, %s stays installed\n", r.Installed.Name)
	} else {
		steps := "steps"
		if len(r.UpgradePath) == 1 {
			steps = "step"
		}
		fmt.Fprintf(out, "Upgrade path from %s (%d %s):\n", r.Installed.Version, len(r.UpgradePath), steps)
		tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "STEP\tFROM\tTO\tBUNDLE\tEDGE\tCATALOG")
		for i, s := range r.UpgradePath {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", i+1, s.FromVersion, s.ToVersion, s.To, s.Edge, s.Catalog)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if r.PathEnd != "" {
		fmt.Fprintf(out, "The path stops: %s\n", r.PathEnd)
	}
	return nil
}
