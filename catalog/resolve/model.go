// Package resolve picks the bundle a catalog source installs: from the
// packages, channels, bundles and deprecations of one or more file-based
// catalogs, a package name, optional channels, a version range, an upgrade
// policy and the installed bundle, it chooses what OLM v1's operator-controller
// chooses for the same input, and says why (the upgrade edge taken) and what is
// out of reach.
//
// The package is pure: no API types, no controllers, no I/O. An Index is built
// once per catalog content and then shared, read-only, by every resolution.
package resolve

import "encoding/json"

// Content is the part of a file-based catalog that resolution reads. Callers
// convert their parsed catalog into it; NewIndex keeps only what resolution
// needs, so Content may be dropped once the Index is built.
type Content struct {
	Packages     []Package
	Channels     []Channel
	Bundles      []Bundle
	Deprecations []Deprecations
}

// Package is an olm.package blob. Its default channel plays no part in
// resolution, as in OLM v1.
type Package struct {
	Name           string
	DefaultChannel string
}

// Channel is an olm.channel blob.
type Channel struct {
	Package string
	Name    string
	Entries []ChannelEntry
}

// ChannelEntry is one entry of a channel: a bundle of the package and the
// upgrade edges that lead to it.
type ChannelEntry struct {
	Name      string
	Replaces  string
	Skips     []string
	SkipRange string
}

// Bundle is an olm.bundle blob. Of its properties, resolution reads
// olm.package (the version) and the dependency types (olm.package.required,
// olm.gvk.required, olm.constraint); callers may leave the others out.
type Bundle struct {
	Package    string
	Name       string
	Image      string
	Properties []Property
}

// Property is one bundle property as the catalog wrote it.
type Property struct {
	Type  string
	Value json.RawMessage
}

// Deprecations is an olm.deprecations blob.
type Deprecations struct {
	Package string
	Entries []DeprecationEntry
}

// DeprecationEntry deprecates the package (Schema "olm.package", no Name), a
// channel ("olm.channel") or a bundle ("olm.bundle") with a message.
type DeprecationEntry struct {
	Schema  string
	Name    string
	Message string
}

// FBC schema and property names read by the index.
const (
	SchemaPackage = "olm.package"
	SchemaChannel = "olm.channel"
	SchemaBundle  = "olm.bundle"

	propertyPackage         = "olm.package"
	propertyPackageRequired = "olm.package.required"
	propertyGVKRequired     = "olm.gvk.required"
	propertyConstraint      = "olm.constraint"
)
