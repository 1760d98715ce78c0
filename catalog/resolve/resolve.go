package resolve

import (
	"fmt"
	"slices"
	"strings"

	mmsemver "github.com/Masterminds/semver/v3"
)

// Request bounds: a request is written by users and checked before any work.
const (
	MaxVersionRangeLength = 64
	MaxChannels           = 256
	MaxNameLength         = 253
	MaxVersionLength      = 128
	// MaxReachabilityChecks bounds the skipRange checks of the walk that
	// finds versions the installed bundle cannot reach; the walk stops there
	// and the result says the list is incomplete.
	MaxReachabilityChecks = 1 << 17
	// MaxUnreachableListed bounds Result.Unreachable, which a status shows.
	MaxUnreachableListed = 64
)

// Policy says which bundles may follow the installed one.
type Policy string

const (
	// CatalogProvided follows the catalog's upgrade edges (replaces, skips,
	// skipRange) from the installed bundle, or stays on it.
	CatalogProvided Policy = "CatalogProvided"
	// SelfCertified allows any version in range, downgrades included.
	SelfCertified Policy = "SelfCertified"
)

// Edge says why the resolved bundle was allowed.
type Edge string

const (
	EdgeInitialInstall Edge = "InitialInstall" // nothing installed
	EdgeInstalled      Edge = "Installed"      // the installed version itself
	EdgeReplaces       Edge = "Replaces"       // its entry replaces the installed bundle
	EdgeSkips          Edge = "Skips"          // its entry skips the installed bundle
	EdgeSkipRange      Edge = "SkipRange"      // its entry's skipRange holds the installed version
	EdgeSelfCertified  Edge = "SelfCertified"  // SelfCertified: any version in range
)

// Installed names the bundle that runs now.
type Installed struct {
	Name    string
	Version string
	// Image, when known, is the installed bundle's image: a bundle of the
	// same name and version with another image is not the installed one.
	Image string
}

// Request is what a catalog source asks for.
type Request struct {
	PackageName  string
	Channels     []string // empty: every channel, and bundles in none
	VersionRange string   // Masterminds semver constraints; empty: any version
	Policy       Policy   // empty: CatalogProvided
	Installed    *Installed
}

// Catalog is one catalog taking part in a resolution.
type Catalog struct {
	Name     string
	Priority int32
	Index    *Index
}

// Result is the bundle a request resolves to.
type Result struct {
	Catalog string
	Bundle  string
	Version string // as the catalog's olm.package property writes it
	Image   string // exactly as the catalog names it
	// Channels are the requested channels (every channel when none were
	// requested) that hold the bundle, sorted.
	Channels []string
	Edge     Edge
	// Unreachable lists versions above the installed one, in the requested
	// channels and range of the chosen catalog, that no chain of upgrade
	// edges within those channels and that range leads to (CatalogProvided
	// with an installed bundle only), lowest first, at most
	// MaxUnreachableListed of them; UnreachableTotal counts them all.
	Unreachable      []string
	UnreachableTotal int
	// UnreachableIncomplete is set when the walk stopped at
	// MaxReachabilityChecks: Unreachable may then name reachable versions.
	UnreachableIncomplete bool
	// Deprecations of the package, of the requested channels (of the
	// bundle's channels when none were requested), of the resolved bundle
	// and of the installed bundle, with the catalog's messages.
	Deprecations []Deprecation
	// Dependencies lists the dependency property types the bundle declares
	// (olm.constraint, olm.gvk.required, olm.package.required). OLM v1
	// refuses to install such a bundle; it is still the one resolution
	// picks, so narrowing the request is the way around it.
	Dependencies []string
}

// DeprecationScope is what a deprecation applies to.
type DeprecationScope string

const (
	ScopePackage         DeprecationScope = "Package"
	ScopeChannel         DeprecationScope = "Channel"
	ScopeBundle          DeprecationScope = "Bundle"
	ScopeInstalledBundle DeprecationScope = "InstalledBundle"
)

// Deprecation is one deprecation that applies to a result.
type Deprecation struct {
	Scope   DeprecationScope
	Name    string
	Message string
}

// RequestError is a request resolution refuses before looking at catalogs.
type RequestError struct {
	Field   string
	Message string
}

func (e *RequestError) Error() string { return e.Field + ": " + e.Message }

// CatalogStats says what one catalog held for a request.
type CatalogStats struct {
	Name           string
	Priority       int32
	PackageFound   bool
	Bundles        int    // bundles of the package
	Matched        int    // of those, in the channels and the range
	Successors     int    // of those, allowed after the installed bundle (CatalogProvided with one installed)
	Best           string // the bundle the catalog offers, if any
	BestDeprecated bool
}

// ResolutionError is a request no bundle satisfies, or that catalogs of the
// same priority satisfy alike.
type ResolutionError struct {
	PackageName  string
	VersionRange string
	Channels     []string
	Policy       Policy
	Installed    *Installed
	Catalogs     []CatalogStats
	// Ambiguous names the catalogs of the same, highest priority that each
	// offer a bundle; empty when nothing matched.
	Ambiguous []string
}

func (e *ResolutionError) Error() string {
	var sb strings.Builder
	successors := e.Policy == CatalogProvided && e.Installed != nil
	if len(e.Ambiguous) > 0 {
		fmt.Fprintf(&sb, "package %q has bundles for %s in catalogs of the same priority %s; give one catalog a higher priority (",
			e.PackageName, e.describe(), quoteList(e.Ambiguous))
		first := true
		for _, c := range e.Catalogs {
			if slices.Contains(e.Ambiguous, c.Name) {
				if !first {
					sb.WriteString("; ")
				}
				first = false
				fmt.Fprintf(&sb, "catalog %q, priority %d: %s", c.Name, c.Priority, c.Best)
			}
		}
		sb.WriteString(")")
		return sb.String()
	}
	fmt.Fprintf(&sb, "no bundle of package %q for %s (", e.PackageName, e.describe())
	if len(e.Catalogs) == 0 {
		sb.WriteString("no catalogs")
	}
	for i, c := range e.Catalogs {
		if i > 0 {
			sb.WriteString("; ")
		}
		if !c.PackageFound {
			fmt.Fprintf(&sb, "catalog %q: no package %q", c.Name, e.PackageName)
			continue
		}
		fmt.Fprintf(&sb, "catalog %q: %d bundles, %d in channels and range", c.Name, c.Bundles, c.Matched)
		if successors {
			fmt.Fprintf(&sb, ", %d of them successors of installed bundle %q", c.Successors, e.Installed.Name)
		}
	}
	sb.WriteString(")")
	return sb.String()
}

func (e *ResolutionError) describe() string {
	var sb strings.Builder
	if e.VersionRange == "" {
		sb.WriteString("any version")
	} else {
		fmt.Fprintf(&sb, "version range %q", e.VersionRange)
	}
	if len(e.Channels) == 0 {
		sb.WriteString(" in any channel")
	} else {
		fmt.Fprintf(&sb, " in channels %s", quoteList(e.Channels))
	}
	if e.Installed != nil {
		fmt.Fprintf(&sb, " after installed bundle %q (version %s, policy %s)", e.Installed.Name, e.Installed.Version, e.Policy)
	}
	return sb.String()
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// query is a checked request.
type query struct {
	req        Request
	policy     Policy
	rng        *mmsemver.Constraints
	installed  *versionRelease
	successors bool // CatalogProvided with an installed bundle
}

func compile(req Request) (*query, error) {
	q := &query{req: req, policy: req.Policy}
	if q.policy == "" {
		q.policy = CatalogProvided
	}
	if q.policy != CatalogProvided && q.policy != SelfCertified {
		return nil, &RequestError{"upgradeConstraintPolicy", fmt.Sprintf("%q is neither %s nor %s", req.Policy, CatalogProvided, SelfCertified)}
	}
	if req.PackageName == "" {
		return nil, &RequestError{"packageName", "must not be empty"}
	}
	if len(req.PackageName) > MaxNameLength {
		return nil, &RequestError{"packageName", fmt.Sprintf("is %d characters, over the limit of %d", len(req.PackageName), MaxNameLength)}
	}
	if len(req.Channels) > MaxChannels {
		return nil, &RequestError{"channels", fmt.Sprintf("has %d channels, over the limit of %d", len(req.Channels), MaxChannels)}
	}
	for i, c := range req.Channels {
		if c == "" || len(c) > MaxNameLength {
			return nil, &RequestError{fmt.Sprintf("channels[%d]", i), fmt.Sprintf("must be 1 to %d characters", MaxNameLength)}
		}
	}
	if req.VersionRange != "" {
		if len(req.VersionRange) > MaxVersionRangeLength {
			return nil, &RequestError{"version", fmt.Sprintf("is %d characters, over the limit of %d", len(req.VersionRange), MaxVersionRangeLength)}
		}
		c, err := mmsemver.NewConstraint(req.VersionRange)
		if err != nil {
			return nil, &RequestError{"version", fmt.Sprintf("not a version range: %v", err)}
		}
		q.rng = c
	}
	if in := req.Installed; in != nil {
		if in.Name == "" || len(in.Name) > MaxNameLength {
			return nil, &RequestError{"installed.name", fmt.Sprintf("must be 1 to %d characters", MaxNameLength)}
		}
		if len(in.Version) > MaxVersionLength {
			return nil, &RequestError{"installed.version", fmt.Sprintf("is %d characters, over the limit of %d", len(in.Version), MaxVersionLength)}
		}
		vr, err := parseVersionRelease(in.Version)
		if err != nil {
			return nil, &RequestError{"installed.version", fmt.Sprintf("%q is not a semver version: %v", in.Version, err)}
		}
		q.installed = &vr
		q.successors = q.policy == CatalogProvided
	}
	return q, nil
}

// selectChannels marks the package's channels the request names; nil means
// no channel filter.
func (q *query) selectChannels(p *pkgIndex) []bool {
	if len(q.req.Channels) == 0 {
		return nil
	}
	sel := make([]bool, len(p.channels))
	for _, name := range q.req.Channels {
		if ci, ok := p.channelIndex(name); ok {
			sel[ci] = true
		}
	}
	return sel
}

func inChannels(b *bundleInfo, sel []bool) bool {
	if sel == nil {
		return true
	}
	for _, r := range b.refs {
		if sel[r.channel] {
			return true
		}
	}
	return false
}

// edge says whether b may follow the installed bundle and why: staying on the
// installed version, or an entry in a selected channel that replaces, skips or
// skip-ranges it (the strongest of them). It costs one range check per
// selected entry of b with a skipRange.
func (q *query) edge(p *pkgIndex, b *bundleInfo, sel []bool) Edge {
	if q.isInstalled(b) {
		return EdgeInstalled
	}
	name := q.req.Installed.Name
	var found Edge
	for _, r := range b.refs {
		if sel != nil && !sel[r.channel] {
			continue
		}
		e := &p.channels[r.channel].entries[r.entry]
		if e.replaces == name {
			return EdgeReplaces
		}
		if found != EdgeSkips && slices.Contains(e.skips, name) {
			found = EdgeSkips
		}
		if found == "" && e.skipRange != nil && e.skipRange(q.installed.version) {
			found = EdgeSkipRange
		}
	}
	return found
}

// isInstalled says whether b is the installed bundle: its version and, when
// known, its name and image. Another bundle of the same version (another image,
// perhaps in another catalog) is not: it needs an upgrade edge like any
// other (an outside review saw a catalog swap the image under "Installed").
func (q *query) isInstalled(b *bundleInfo) bool {
	in := q.req.Installed
	return b.vr.compare(*q.installed) == 0 && (in.Name == "" || b.name == in.Name) && (in.Image == "" || b.image == in.Image)
}

// better orders candidates as OLM v1 does: not deprecated first, then the
// highest version and release. Ties keep the catalog's order.
func better(a, b *bundleInfo) bool {
	if a.deprecated != b.deprecated {
		return !a.deprecated
	}
	return a.vr.compare(b.vr) > 0
}

type candidate struct {
	catalog *Catalog
	pkg     *pkgIndex
	bundle  int32
	sel     []bool
	edge    Edge
}

// Resolve picks the bundle for req among catalogs. Each catalog offers its
// best bundle of the package (in the channels and range and, under
// CatalogProvided with a bundle installed, a successor of it or the installed
// version itself); a catalog offering a bundle that is not deprecated beats
// one offering a deprecated bundle, then the highest priority wins; two
// catalogs of that same priority are an error. Its cost is linear in the
// package's bundles and channel entries in each catalog.
func Resolve(req Request, catalogs []Catalog) (*Result, error) {
	q, err := compile(req)
	if err != nil {
		return nil, err
	}
	stats := make([]CatalogStats, 0, len(catalogs))
	var offered []candidate
	for i := range catalogs {
		c := &catalogs[i]
		if c.Index == nil {
			return nil, fmt.Errorf("catalog %q has no index", c.Name)
		}
		st := CatalogStats{Name: c.Name, Priority: c.Priority}
		p := c.Index.packages[req.PackageName]
		if p == nil {
			stats = append(stats, st)
			continue
		}
		st.PackageFound, st.Bundles = true, len(p.bundles)
		sel := q.selectChannels(p)
		top, topEdge := int32(-1), Edge("")
		for bi := range p.bundles {
			b := &p.bundles[bi]
			if !inChannels(b, sel) || (q.rng != nil && !q.rng.Check(b.mm)) {
				continue
			}
			st.Matched++
			var e Edge
			switch {
			case q.successors:
				if e = q.edge(p, b, sel); e == "" {
					continue
				}
				st.Successors++
			case q.installed != nil && q.isInstalled(b):
				e = EdgeInstalled
			case q.installed != nil:
				e = EdgeSelfCertified
			default:
				e = EdgeInitialInstall
			}
			// Among equals, the installed bundle itself.
			if top < 0 || better(b, &p.bundles[top]) || !better(&p.bundles[top], b) && e == EdgeInstalled {
				top, topEdge = int32(bi), e
			}
		}
		if top >= 0 {
			st.Best, st.BestDeprecated = p.bundles[top].name, p.bundles[top].deprecated
			offered = append(offered, candidate{catalog: c, pkg: p, bundle: top, sel: sel, edge: topEdge})
		}
		stats = append(stats, st)
	}
	rerr := &ResolutionError{
		PackageName: req.PackageName, VersionRange: req.VersionRange, Channels: req.Channels,
		Policy: q.policy, Installed: req.Installed, Catalogs: stats,
	}
	if len(offered) == 0 {
		return nil, rerr
	}
	// A bundle that is not deprecated beats any deprecated one; among the
	// rest the highest priority wins.
	anyCurrent := slices.ContainsFunc(offered, func(c candidate) bool { return !c.pkg.bundles[c.bundle].deprecated })
	win := -1
	var tied []string
	for i, c := range offered {
		if anyCurrent && c.pkg.bundles[c.bundle].deprecated {
			continue
		}
		switch {
		case win < 0 || c.catalog.Priority > offered[win].catalog.Priority:
			win, tied = i, []string{c.catalog.Name}
		case c.catalog.Priority == offered[win].catalog.Priority:
			tied = append(tied, c.catalog.Name)
		}
	}
	if len(tied) > 1 {
		slices.Sort(tied)
		rerr.Ambiguous = tied
		return nil, rerr
	}
	return q.result(offered[win]), nil
}

func (q *query) result(c candidate) *Result {
	p, b := c.pkg, &c.pkg.bundles[c.bundle]
	r := &Result{
		Catalog:      c.catalog.Name,
		Bundle:       b.name,
		Version:      b.versionText,
		Image:        b.image,
		Edge:         c.edge,
		Dependencies: slices.Clone(b.deps),
	}
	for _, ref := range b.refs {
		if c.sel == nil || c.sel[ref.channel] {
			r.Channels = append(r.Channels, p.channels[ref.channel].name)
		}
	}
	r.Channels = slices.Compact(r.Channels)
	if p.deprecated {
		r.Deprecations = append(r.Deprecations, Deprecation{ScopePackage, p.name, p.message})
	}
	if len(q.req.Channels) > 0 {
		for ci, ch := range p.channels {
			if c.sel[ci] && ch.deprecated {
				r.Deprecations = append(r.Deprecations, Deprecation{ScopeChannel, ch.name, ch.message})
			}
		}
	} else {
		for _, name := range r.Channels {
			if ci, _ := p.channelIndex(name); p.channels[ci].deprecated {
				r.Deprecations = append(r.Deprecations, Deprecation{ScopeChannel, name, p.channels[ci].message})
			}
		}
	}
	if b.deprecated {
		r.Deprecations = append(r.Deprecations, Deprecation{ScopeBundle, b.name, b.message})
	}
	if in := q.req.Installed; in != nil {
		// The installed bundle staying installed is reported once, as
		// the bundle.
		if ii, ok := p.byName[in.Name]; ok && p.bundles[ii].deprecated && in.Name != b.name {
			r.Deprecations = append(r.Deprecations, Deprecation{ScopeInstalledBundle, in.Name, p.bundles[ii].message})
		}
		if q.successors {
			r.Unreachable, r.UnreachableTotal, r.UnreachableIncomplete = q.unreachable(p, c.sel)
		}
	}
	return r
}

const (
	flagMatched uint8 = 1 << iota
	flagReached
)

// unreachable walks the upgrade edges from the installed bundle through
// bundles in the selected channels and the range, and returns the matching
// versions above the installed one that the walk never reaches. Replaces and
// skips are map lookups; skipRange entries wait in a pending list that each
// visit checks and compacts, so the work is the package's entries plus the
// range checks, and those stop at MaxReachabilityChecks.
func (q *query) unreachable(p *pkgIndex, sel []bool) (listed []string, total int, incomplete bool) {
	flags := make([]uint8, len(p.bundles))
	above := 0
	queue := make([]int32, 0, 16)
	for bi := range p.bundles {
		b := &p.bundles[bi]
		if !inChannels(b, sel) || (q.rng != nil && !q.rng.Check(b.mm)) {
			continue
		}
		flags[bi] = flagMatched
		switch c := b.vr.compare(*q.installed); {
		case c == 0:
			flags[bi] |= flagReached
			queue = append(queue, int32(bi))
		case c > 0:
			above++
		}
	}
	if above == 0 {
		return nil, 0, false
	}
	selected := func(r entryRef) bool { return sel == nil || sel[r.channel] }
	bundleOf := func(r entryRef) int32 { return p.channels[r.channel].entries[r.entry].bundle }
	var pending []entryRef
	for _, r := range p.ranged {
		if selected(r) && flags[bundleOf(r)] == flagMatched {
			pending = append(pending, r)
		}
	}
	reach := func(r entryRef) {
		if bi := bundleOf(r); selected(r) && flags[bi] == flagMatched {
			flags[bi] |= flagReached
			queue = append(queue, bi)
		}
	}
	checks := 0
	visit := func(name string, v *versionRelease) {
		for _, r := range p.replacedBy[name] {
			reach(r)
		}
		for _, r := range p.skippedBy[name] {
			reach(r)
		}
		kept := pending[:0]
		for i, r := range pending {
			if flags[bundleOf(r)] != flagMatched {
				continue // reached meanwhile
			}
			if checks == MaxReachabilityChecks {
				incomplete = true
				kept = append(kept, pending[i:]...)
				break
			}
			checks++
			if p.channels[r.channel].entries[r.entry].skipRange(v.version) {
				reach(r)
			} else {
				kept = append(kept, r)
			}
		}
		pending = kept
	}
	visit(q.req.Installed.Name, q.installed)
	for len(queue) > 0 && !incomplete {
		bi := queue[0]
		queue = queue[1:]
		visit(p.bundles[bi].name, &p.bundles[bi].vr)
	}
	var out []*bundleInfo
	for bi, f := range flags {
		if f == flagMatched && p.bundles[bi].vr.compare(*q.installed) > 0 {
			out = append(out, &p.bundles[bi])
		}
	}
	slices.SortStableFunc(out, func(a, b *bundleInfo) int { return a.vr.compare(b.vr) })
	last := ""
	for _, b := range out {
		if total > 0 && b.versionText == last {
			continue // one version in several bundles
		}
		last = b.versionText
		total++
		if len(listed) < MaxUnreachableListed {
			listed = append(listed, b.versionText)
		}
	}
	return listed, total, incomplete
}

// Validate checks req as Resolve does before looking at catalogs: a
// *RequestError names the field at fault.
func (req Request) Validate() error {
	_, err := compile(req)
	return err
}
