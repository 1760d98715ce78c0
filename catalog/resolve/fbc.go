package resolve

import "github.com/rukpak-dev/rukpak/catalog/fbc"

// FromPackages converts packages read from a stored catalog document
// (fbc.ReadPackage) into resolution's input. The packages' slices are
// shared, not copied: the Content is meant for NewIndex, which keeps only
// what it needs.
func FromPackages(pkgs ...*fbc.Package) Content {
	var c Content
	for _, p := range pkgs {
		if p == nil {
			continue
		}
		c.Packages = append(c.Packages, Package{Name: p.Name, DefaultChannel: p.DefaultChannel})
		for _, ch := range p.Channels {
			entries := make([]ChannelEntry, len(ch.Entries))
			for i, e := range ch.Entries {
				entries[i] = ChannelEntry{Name: e.Name, Replaces: e.Replaces, Skips: e.Skips, SkipRange: e.SkipRange}
			}
			c.Channels = append(c.Channels, Channel{Package: p.Name, Name: ch.Name, Entries: entries})
		}
		for _, b := range p.Bundles {
			props := make([]Property, len(b.Properties))
			for i, prop := range b.Properties {
				props[i] = Property{Type: prop.Type, Value: prop.Value}
			}
			c.Bundles = append(c.Bundles, Bundle{Package: p.Name, Name: b.Name, Image: b.Image, Properties: props})
		}
		if len(p.Deprecations) > 0 {
			d := Deprecations{Package: p.Name, Entries: make([]DeprecationEntry, len(p.Deprecations))}
			for i, e := range p.Deprecations {
				d.Entries[i] = DeprecationEntry{Schema: e.Schema, Name: e.Name, Message: e.Message}
			}
			c.Deprecations = append(c.Deprecations, d)
		}
	}
	return c
}
