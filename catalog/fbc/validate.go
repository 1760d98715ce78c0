package fbc

import (
	"fmt"
	"sort"
	"strings"

	"github.com/blang/semver/v4"
)

// parseVersion parses a bundle version as OLM does (strict semver).
func parseVersion(v string) (semver.Version, error) {
	if v == "" {
		return semver.Version{}, fmt.Errorf("is empty")
	}
	return semver.Parse(v)
}

// validate checks the invariants that span blobs: every package has its
// olm.package blob, channels and bundles; its default channel exists; each
// channel has one head, entries that are bundles of the package, no
// replaces cycle, no stranded entry and parsable skipRanges; every bundle
// is in a channel; deprecations name what exists.
func (b *builder) validate() error {
	for _, name := range b.order {
		p := b.pkgs[name]
		if p.origin == nil {
			first := ""
			switch {
			case len(p.channels) > 0:
				first = fmt.Sprintf("%s (%s)", p.channels[0].origin, describe(SchemaChannel, p.channels[0].name, name))
			case p.deprecations != nil:
				first = fmt.Sprintf("%s (%s)", p.deprecations, describe(SchemaDeprecations, "", name))
			default:
				for bundle, o := range p.bundles {
					first = fmt.Sprintf("%s (%s)", o, describe(SchemaBundle, bundle, name))
					break
				}
			}
			b.fail("%s: package %q has no olm.package blob", first, name)
			continue
		}
		b.validatePackage(p)
		if len(b.errs) >= maxErrors {
			break
		}
	}
	return b.errors()
}

func (b *builder) validatePackage(p *pkgMeta) {
	where := fmt.Sprintf("%s (%s)", p.origin, describe(SchemaPackage, p.name, ""))
	if len(p.channels) == 0 {
		b.fail("%s: has no olm.channel blob", where)
	}
	if len(p.bundles) == 0 {
		b.fail("%s: has no olm.bundle blob", where)
	}
	if p.defaultChannel != "" && len(p.channels) > 0 && p.channel(p.defaultChannel) == nil {
		b.fail("%s: defaultChannel %q is not a channel of the package", where, p.defaultChannel)
	}
	inChannel := map[string]bool{}
	for _, c := range p.channels {
		b.validateChannel(p, c)
		for _, e := range c.entries {
			inChannel[e.Name] = true
		}
	}
	var orphans []string
	for name := range p.bundles {
		if !inChannel[name] {
			orphans = append(orphans, name)
		}
	}
	sort.Strings(orphans)
	for _, name := range orphans {
		b.fail("%s (%s): is in no channel", p.bundles[name], describe(SchemaBundle, name, p.name))
	}
	for _, d := range p.deprecated {
		found := false
		switch d.schema {
		case SchemaChannel:
			found = p.channel(d.name) != nil
		case SchemaBundle:
			_, found = p.bundles[d.name]
		}
		if !found {
			b.fail("%s (%s): entries[%d] deprecates %s %q, which the package does not have", d.origin, describe(SchemaDeprecations, "", p.name), d.entryPosition, d.schema, d.name)
		}
	}
}

func (p *pkgMeta) channel(name string) *channelMeta {
	for _, c := range p.channels {
		if c.name == name {
			return c
		}
	}
	return nil
}

func (b *builder) validateChannel(p *pkgMeta, c *channelMeta) {
	where := fmt.Sprintf("%s (%s)", c.origin, describe(SchemaChannel, c.name, p.name))
	if len(c.entries) == 0 {
		b.fail("%s: has no entries", where)
		return
	}
	entries := make(map[string]*entry, len(c.entries))
	ok := true
	for i := range c.entries {
		e := &c.entries[i]
		switch {
		case e.Name == "":
			b.fail("%s: entries[%d] has no name", where, i)
			ok = false
			continue
		case entries[e.Name] != nil:
			b.fail("%s: entry %q appears more than once", where, e.Name)
			ok = false
			continue
		}
		entries[e.Name] = e
		if _, found := p.bundles[e.Name]; !found {
			b.fail("%s: entry %q is not an olm.bundle of package %q", where, e.Name, p.name)
			ok = false
		}
		if e.Replaces == e.Name {
			b.fail("%s: entry %q replaces itself", where, e.Name)
			ok = false
		}
		if e.SkipRange != "" {
			if _, err := semver.ParseRange(e.SkipRange); err != nil {
				b.fail("%s: entry %q: skipRange %q: %v", where, e.Name, e.SkipRange, err)
				ok = false
			}
		}
	}
	if !ok {
		return
	}
	// Replaces cycles, each reported once: walk from every entry, marking
	// what is done.
	done := map[string]bool{}
	for i := range c.entries {
		onPath := map[string]int{}
		var path []string
		for cur := c.entries[i].Name; cur != "" && !done[cur]; {
			e := entries[cur]
			if e == nil {
				break // replaces a bundle outside the channel: allowed
			}
			if at, seen := onPath[cur]; seen {
				b.fail("%s: replaces cycle: %s", where, strings.Join(append(path[at:], cur), " -> "))
				return
			}
			onPath[cur] = len(path)
			path = append(path, cur)
			cur = e.Replaces
		}
		for _, n := range path {
			done[n] = true
		}
	}
	// Heads: entries no other entry replaces or skips.
	incoming := map[string]bool{}
	for _, e := range c.entries {
		if e.Replaces != "" {
			incoming[e.Replaces] = true
		}
		for _, s := range e.Skips {
			incoming[s] = true
		}
	}
	var heads []string
	for _, e := range c.entries {
		if !incoming[e.Name] {
			heads = append(heads, e.Name)
		}
	}
	switch {
	case len(heads) == 0:
		b.fail("%s: has no head (every entry is replaced or skipped by another)", where)
		return
	case len(heads) > 1:
		b.fail("%s: has %d heads, needs exactly one: %s", where, len(heads), strings.Join(heads, ", "))
		return
	}
	// Stranded entries: neither on the replaces chain from the head nor
	// skipped by an entry on it, so no upgrade ever leaves them.
	reached := map[string]bool{}
	for cur := heads[0]; cur != "" && !reached[cur]; {
		reached[cur] = true
		e := entries[cur]
		if e == nil {
			break
		}
		for _, s := range e.Skips {
			reached[s] = true
		}
		cur = e.Replaces
	}
	var stranded []string
	for _, e := range c.entries {
		if !reached[e.Name] {
			stranded = append(stranded, e.Name)
		}
	}
	if len(stranded) > 0 {
		b.fail("%s: stranded entries (not on the replaces chain from head %q, nor skipped by an entry on it): %s", where, heads[0], strings.Join(stranded, ", "))
	}
}
