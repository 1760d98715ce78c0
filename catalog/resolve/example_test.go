package resolve_test

import (
	"errors"
	"fmt"

	"github.com/rukpak-dev/rukpak/catalog/resolve"
)

func version(pkg, v string) []resolve.Property {
	return []resolve.Property{{Type: "olm.package", Value: fmt.Appendf(nil, `{"packageName":%q,"version":%q}`, pkg, v)}}
}

func ExampleResolve() {
	content := resolve.Content{
		Packages: []resolve.Package{{Name: "demo"}},
		Channels: []resolve.Channel{{Package: "demo", Name: "stable", Entries: []resolve.ChannelEntry{
			{Name: "demo.v1.0.0"},
			{Name: "demo.v1.1.0", Replaces: "demo.v1.0.0"},
			{Name: "demo.v1.2.0", Replaces: "demo.v1.1.0", SkipRange: "<1.2.0"},
			{Name: "demo.v2.0.0", Replaces: "demo.v1.2.0"},
		}}},
		Bundles: []resolve.Bundle{
			{Package: "demo", Name: "demo.v1.0.0", Image: "example.com/demo@sha256:10", Properties: version("demo", "1.0.0")},
			{Package: "demo", Name: "demo.v1.1.0", Image: "example.com/demo@sha256:11", Properties: version("demo", "1.1.0")},
			{Package: "demo", Name: "demo.v1.2.0", Image: "example.com/demo@sha256:12", Properties: version("demo", "1.2.0")},
			{Package: "demo", Name: "demo.v2.0.0", Image: "example.com/demo@sha256:20", Properties: version("demo", "2.0.0")},
		},
	}
	// Once per catalog content; shared by every resolution against it.
	idx, err := resolve.NewIndex(content)
	if err != nil {
		panic(err)
	}
	catalogs := []resolve.Catalog{{Name: "community", Index: idx}}

	res, _ := resolve.Resolve(resolve.Request{PackageName: "demo", VersionRange: "^1"}, catalogs)
	fmt.Println(res.Bundle, res.Image, res.Edge)

	installed := &resolve.Installed{Name: "demo.v1.0.0", Version: "1.0.0"}
	res, _ = resolve.Resolve(resolve.Request{PackageName: "demo", VersionRange: "^1", Installed: installed}, catalogs)
	fmt.Println(res.Bundle, res.Edge)

	_, err = resolve.Resolve(resolve.Request{PackageName: "demo", VersionRange: ">=2", Installed: installed}, catalogs)
	var rerr *resolve.ResolutionError
	fmt.Println(errors.As(err, &rerr), err)
	// Output:
	// demo.v1.2.0 example.com/demo@sha256:12 InitialInstall
	// demo.v1.2.0 SkipRange
	// true no bundle of package "demo" for version range ">=2" in any channel after installed bundle "demo.v1.0.0" (version 1.0.0, policy CatalogProvided) (catalog "community": 4 bundles, 1 in channels and range, 0 of them successors of installed bundle "demo.v1.0.0")
}
