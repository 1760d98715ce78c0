package resolve

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	mmsemver "github.com/Masterminds/semver/v3"
	bsemver "github.com/blang/semver/v4"
)

// MaxSkipRangeLength bounds an entry's skipRange: ranges are parsed once per
// index and checked many times per resolution.
const MaxSkipRangeLength = 256

// MaxSkipRangeComparisons bounds the comparisons an entry's skipRange
// parses into (a wildcard such as "1.x" is two): each is kept for the
// index's life, and 256 characters of wildcards made 128 of them, ~15 KB
// per entry, 34 times the catalog's size in memory (an outside review).
// Real ranges have two.
const MaxSkipRangeComparisons = 8

// MaxImageLength bounds a bundle's image reference, as the status field
// that reports it does.
const MaxImageLength = 4096

// MaxIndexBytes bounds what one Index holds, as Size estimates it: the
// text limits bound a catalog's document, not what parsing makes of it (a
// version's identifiers, a skipRange's comparisons), and every resolution
// that reads the package builds and may cache its index. The largest real
// package of the test data is indexed in under 1 MiB; a package of 50,000
// bundles, each entry with a skipRange, in about 40 MiB.
const MaxIndexBytes = 64 << 20

// Estimated bytes an index holds (measured, rounded up): per bundle and
// channel entry, per character of a version's pre-release and build
// (kept parsed twice, one identifier per two characters at most), per
// skipRange comparison, per skip.
const (
	bundleBytes     = 640
	versionCharCost = 24
	entryBytes      = 192
	comparisonBytes = 128
	skipBytes       = 128
	channelBytes    = 128
)

// Index is one catalog's content prepared for resolution. It is immutable once
// built and safe for concurrent use: every resolution against the same catalog
// content shares one Index.
type Index struct {
	packages map[string]*pkgIndex
	size     int64 // estimated bytes held (Size)
}

// Size estimates the bytes the index holds (its strings included), at or
// above what it measured on the shapes of the tests.
func (idx *Index) Size() int64 { return idx.size }

// charge adds n bytes to the index's estimate, refusing past MaxIndexBytes.
func (idx *Index) charge(n int) error {
	if idx.size += int64(n); idx.size > MaxIndexBytes {
		return fmt.Errorf("the index of this content would hold more than %d MiB (estimated), over the limit", MaxIndexBytes>>20)
	}
	return nil
}

type pkgIndex struct {
	name     string
	bundles  []bundleInfo
	byName   map[string]int32
	channels []channelInfo // sorted by name
	// Upgrade edges of every channel, for the reachability walk.
	replacedBy map[string][]entryRef // bundle name -> entries that replace it
	skippedBy  map[string][]entryRef // bundle name -> entries that skip it
	ranged     []entryRef            // entries with a skipRange
	deprecated bool
	message    string
}

type bundleInfo struct {
	name        string
	image       string
	versionText string
	vr          versionRelease
	mm          *mmsemver.Version
	deps        []string // dependency property types, sorted
	deprecated  bool
	message     string
	refs        []entryRef // channel entries naming this bundle, by channel order
}

type entryRef struct {
	channel int32
	entry   int32
}

type channelInfo struct {
	name       string
	entries    []entryInfo
	deprecated bool
	message    string
}

type entryInfo struct {
	bundle    int32
	replaces  string
	skips     []string
	skipRange bsemver.Range // nil when the entry has none
}

// NewIndex checks and indexes a catalog's content. Its cost is linear in the
// content; it refuses content resolution cannot trust: duplicate names, a
// channel entry or bundle of an unknown package or bundle, a bundle without
// exactly one olm.package property or with a version that is not semver, a
// version over MaxVersionLength characters or an image over MaxImageLength,
// a skipRange that does not parse or is over MaxSkipRangeLength or
// MaxSkipRangeComparisons.
func NewIndex(c Content) (*Index, error) {
	idx := &Index{packages: make(map[string]*pkgIndex, len(c.Packages))}
	for _, p := range c.Packages {
		if p.Name == "" {
			return nil, errors.New("olm.package with an empty name")
		}
		if _, dup := idx.packages[p.Name]; dup {
			return nil, fmt.Errorf("package %q: declared twice", p.Name)
		}
		idx.packages[p.Name] = &pkgIndex{
			name:   p.Name,
			byName: map[string]int32{}, replacedBy: map[string][]entryRef{}, skippedBy: map[string][]entryRef{},
		}
	}
	for i := range c.Bundles {
		if err := idx.addBundle(&c.Bundles[i]); err != nil {
			return nil, err
		}
	}
	chans := make([]*Channel, len(c.Channels))
	for i := range c.Channels {
		chans[i] = &c.Channels[i]
	}
	slices.SortStableFunc(chans, func(a, b *Channel) int { return strings.Compare(a.Name, b.Name) })
	for _, ch := range chans {
		if err := idx.addChannel(ch); err != nil {
			return nil, err
		}
	}
	for i := range c.Deprecations {
		if err := idx.addDeprecations(&c.Deprecations[i]); err != nil {
			return nil, err
		}
	}
	return idx, nil
}

func (idx *Index) pkg(name, what string) (*pkgIndex, error) {
	p := idx.packages[name]
	if p == nil {
		return nil, fmt.Errorf("%s names package %q, which has no olm.package", what, name)
	}
	return p, nil
}

func (idx *Index) addBundle(b *Bundle) error {
	what := fmt.Sprintf("bundle %q", b.Name)
	if b.Name == "" {
		return fmt.Errorf("olm.bundle of package %q with an empty name", b.Package)
	}
	p, err := idx.pkg(b.Package, what)
	if err != nil {
		return err
	}
	if _, dup := p.byName[b.Name]; dup {
		return fmt.Errorf("package %q: %s declared twice", p.name, what)
	}
	if len(b.Image) > MaxImageLength {
		return fmt.Errorf("package %q: %s: image is %d characters, over the limit of %d", p.name, what, len(b.Image), MaxImageLength)
	}
	if err := idx.charge(bundleBytes + len(b.Name) + len(b.Image)); err != nil {
		return fmt.Errorf("package %q: %w", p.name, err)
	}
	info := bundleInfo{name: b.Name, image: b.Image}
	found := false
	for _, prop := range b.Properties {
		switch prop.Type {
		case propertyPackage:
			if found {
				return fmt.Errorf("package %q: %s has more than one olm.package property", p.name, what)
			}
			found = true
			var v struct {
				PackageName string `json:"packageName"`
				Version     string `json:"version"`
			}
			if err := json.Unmarshal(prop.Value, &v); err != nil {
				return fmt.Errorf("package %q: %s: olm.package property: %w", p.name, what, err)
			}
			// Each identifier of a long version is kept parsed.
			if len(v.Version) > MaxVersionLength {
				return fmt.Errorf("package %q: %s: version is %d characters, over the limit of %d", p.name, what, len(v.Version), MaxVersionLength)
			}
			if v.PackageName != p.name {
				return fmt.Errorf("package %q: %s: olm.package property names package %q", p.name, what, v.PackageName)
			}
			// Its pre-release and build, which are kept as identifiers.
			extra := 0
			if i := strings.IndexAny(v.Version, "-+"); i >= 0 {
				extra = len(v.Version) - i
			}
			if err := idx.charge(versionCharCost * extra); err != nil {
				return fmt.Errorf("package %q: %w", p.name, err)
			}
			vr, err := parseVersionRelease(v.Version)
			if err != nil {
				return fmt.Errorf("package %q: %s: version %q: %w", p.name, what, v.Version, err)
			}
			info.versionText, info.vr, info.mm = v.Version, vr, vr.mastermindsVersion()
		case propertyPackageRequired, propertyGVKRequired, propertyConstraint:
			if !slices.Contains(info.deps, prop.Type) {
				info.deps = append(info.deps, prop.Type)
			}
		}
	}
	if !found {
		return fmt.Errorf("package %q: %s has no olm.package property", p.name, what)
	}
	slices.Sort(info.deps)
	p.byName[b.Name] = int32(len(p.bundles))
	p.bundles = append(p.bundles, info)
	return nil
}

func (idx *Index) addChannel(ch *Channel) error {
	what := fmt.Sprintf("channel %q", ch.Name)
	if ch.Name == "" {
		return fmt.Errorf("olm.channel of package %q with an empty name", ch.Package)
	}
	p, err := idx.pkg(ch.Package, what)
	if err != nil {
		return err
	}
	if n := len(p.channels); n > 0 && p.channels[n-1].name == ch.Name {
		return fmt.Errorf("package %q: %s declared twice", p.name, what)
	}
	if err := idx.charge(channelBytes + len(ch.Name)); err != nil {
		return fmt.Errorf("package %q: %w", p.name, err)
	}
	ci := int32(len(p.channels))
	info := channelInfo{name: ch.Name, entries: make([]entryInfo, 0, len(ch.Entries))}
	for i := range ch.Entries {
		e := &ch.Entries[i]
		bi, ok := p.byName[e.Name]
		if !ok {
			return fmt.Errorf("package %q: %s: entry %q is not a bundle of the package", p.name, what, e.Name)
		}
		b := &p.bundles[bi]
		if n := len(b.refs); n > 0 && b.refs[n-1].channel == ci {
			return fmt.Errorf("package %q: %s: entry %q appears twice", p.name, what, e.Name)
		}
		cost := entryBytes + len(e.Replaces) + comparisonBytes*comparisons(e.SkipRange)
		for _, s := range e.Skips {
			cost += skipBytes + len(s)
		}
		if err := idx.charge(cost); err != nil {
			return fmt.Errorf("package %q: %w", p.name, err)
		}
		ref := entryRef{channel: ci, entry: int32(len(info.entries))}
		entry := entryInfo{bundle: bi, replaces: e.Replaces, skips: e.Skips}
		if e.Replaces != "" {
			p.replacedBy[e.Replaces] = append(p.replacedBy[e.Replaces], ref)
		}
		for _, s := range e.Skips {
			p.skippedBy[s] = append(p.skippedBy[s], ref)
		}
		if e.SkipRange != "" {
			if len(e.SkipRange) > MaxSkipRangeLength {
				return fmt.Errorf("package %q: %s: entry %q: skipRange is %d characters, over the limit of %d",
					p.name, what, e.Name, len(e.SkipRange), MaxSkipRangeLength)
			}
			if n := comparisons(e.SkipRange); n > MaxSkipRangeComparisons {
				return fmt.Errorf("package %q: %s: entry %q: skipRange makes %d comparisons, over the limit of %d",
					p.name, what, e.Name, n, MaxSkipRangeComparisons)
			}
			r, err := bsemver.ParseRange(e.SkipRange)
			if err != nil {
				return fmt.Errorf("package %q: %s: entry %q: skipRange %q: %w", p.name, what, e.Name, e.SkipRange, err)
			}
			entry.skipRange = r
			p.ranged = append(p.ranged, ref)
		}
		info.entries = append(info.entries, entry)
		b.refs = append(b.refs, ref)
	}
	p.channels = append(p.channels, info)
	return nil
}

// addDeprecations records deprecations. References to channels or bundles
// the package does not have, and reference schemas other than the three the
// format defines, deprecate nothing.
func (idx *Index) addDeprecations(d *Deprecations) error {
	p, err := idx.pkg(d.Package, "olm.deprecations")
	if err != nil {
		return err
	}
	for _, e := range d.Entries {
		if err := idx.charge(len(e.Message)); err != nil {
			return fmt.Errorf("package %q: %w", p.name, err)
		}
		switch e.Schema {
		case SchemaPackage:
			if !p.deprecated {
				p.deprecated, p.message = true, e.Message
			}
		case SchemaChannel:
			if ci, ok := p.channelIndex(e.Name); ok && !p.channels[ci].deprecated {
				p.channels[ci].deprecated, p.channels[ci].message = true, e.Message
			}
		case SchemaBundle:
			if bi, ok := p.byName[e.Name]; ok && !p.bundles[bi].deprecated {
				p.bundles[bi].deprecated, p.bundles[bi].message = true, e.Message
			}
		}
	}
	return nil
}

func (p *pkgIndex) channelIndex(name string) (int, bool) {
	return slices.BinarySearchFunc(p.channels, name, func(c channelInfo, n string) int { return strings.Compare(c.name, n) })
}

// Packages returns the names of the index's packages, sorted.
func (idx *Index) Packages() []string {
	names := make([]string, 0, len(idx.packages))
	for n := range idx.packages {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// BundleByImage finds the bundle of package pkg whose image is exactly
// image, as the catalog names it: the way back from an installed Bundle,
// whose spec holds the image it was resolved to, to the catalog bundle.
func (idx *Index) BundleByImage(pkg, image string) (Installed, bool) {
	p := idx.packages[pkg]
	if p == nil || image == "" {
		return Installed{}, false
	}
	for i := range p.bundles {
		if b := &p.bundles[i]; b.image == image {
			return Installed{Name: b.name, Version: b.versionText}, true
		}
	}
	return Installed{}, false
}

// comparisons is how many comparisons bsemver.ParseRange makes of r, or
// more: one per term, two per wildcard term.
func comparisons(r string) int {
	n := 0
	for _, term := range strings.Fields(strings.ReplaceAll(r, "||", " ")) {
		n++
		if strings.ContainsAny(term, "xX*") {
			n++
		}
	}
	return n
}
