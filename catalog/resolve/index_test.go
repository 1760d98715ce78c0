package resolve

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func pkgProp(pkg, version string) Property {
	return Property{Type: propertyPackage, Value: fmt.Appendf(nil, `{"packageName":%q,"version":%q}`, pkg, version)}
}

func bundle(pkg, name, version string) Bundle {
	return Bundle{Package: pkg, Name: name, Image: "example.com/" + name, Properties: []Property{pkgProp(pkg, version)}}
}

// small is a two-bundle package to break one rule at a time.
func small() Content {
	return Content{
		Packages: []Package{{Name: "p", DefaultChannel: "stable"}},
		Channels: []Channel{{Package: "p", Name: "stable", Entries: []ChannelEntry{{Name: "p.v1"}, {Name: "p.v2", Replaces: "p.v1", SkipRange: "<2.0.0"}}}},
		Bundles:  []Bundle{bundle("p", "p.v1", "1.0.0"), bundle("p", "p.v2", "2.0.0")},
	}
}

func TestNewIndexRefusesInvalidCatalogs(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(c *Content)
		err    string
	}{
		{"empty package name", func(c *Content) { c.Packages = append(c.Packages, Package{}) }, "olm.package with an empty name"},
		{"package twice", func(c *Content) { c.Packages = append(c.Packages, Package{Name: "p"}) }, `package "p": declared twice`},
		{"bundle of an unknown package", func(c *Content) { c.Bundles = append(c.Bundles, bundle("q", "q.v1", "1.0.0")) },
			`bundle "q.v1" names package "q", which has no olm.package`},
		{"bundle without a name", func(c *Content) { c.Bundles[0].Name = "" }, `olm.bundle of package "p" with an empty name`},
		{"bundle twice", func(c *Content) { c.Bundles = append(c.Bundles, bundle("p", "p.v1", "1.0.1")) }, `package "p": bundle "p.v1" declared twice`},
		{"no olm.package property", func(c *Content) { c.Bundles[1].Properties = nil }, `package "p": bundle "p.v2" has no olm.package property`},
		{"two olm.package properties", func(c *Content) { c.Bundles[1].Properties = append(c.Bundles[1].Properties, pkgProp("p", "2.0.1")) },
			`package "p": bundle "p.v2" has more than one olm.package property`},
		{"olm.package of another package", func(c *Content) { c.Bundles[1].Properties = []Property{pkgProp("q", "2.0.0")} },
			`package "p": bundle "p.v2": olm.package property names package "q"`},
		{"olm.package not an object", func(c *Content) {
			c.Bundles[1].Properties = []Property{{Type: propertyPackage, Value: []byte(`"2.0.0"`)}}
		},
			`package "p": bundle "p.v2": olm.package property: json: cannot unmarshal string into Go value of type struct { PackageName string "json:\"packageName\""; Version string "json:\"version\"" }`},
		{"version not semver", func(c *Content) { c.Bundles[1].Properties = []Property{pkgProp("p", "2.0")} },
			`package "p": bundle "p.v2": version "2.0": No Major.Minor.Patch elements found`},
		{"version with a v", func(c *Content) { c.Bundles[1].Properties = []Property{pkgProp("p", "v2.0.0")} },
			`package "p": bundle "p.v2": version "v2.0.0": Invalid character(s) found in major number "v2"`},
		{"channel of an unknown package", func(c *Content) { c.Channels = append(c.Channels, Channel{Package: "q", Name: "stable"}) },
			`channel "stable" names package "q", which has no olm.package`},
		{"channel without a name", func(c *Content) { c.Channels[0].Name = "" }, `olm.channel of package "p" with an empty name`},
		{"channel twice", func(c *Content) { c.Channels = append(c.Channels, Channel{Package: "p", Name: "stable"}) }, `package "p": channel "stable" declared twice`},
		{"entry not a bundle", func(c *Content) { c.Channels[0].Entries = append(c.Channels[0].Entries, ChannelEntry{Name: "p.v3"}) },
			`package "p": channel "stable": entry "p.v3" is not a bundle of the package`},
		{"entry twice", func(c *Content) { c.Channels[0].Entries = append(c.Channels[0].Entries, ChannelEntry{Name: "p.v1"}) },
			`package "p": channel "stable": entry "p.v1" appears twice`},
		{"skipRange over the limit", func(c *Content) { c.Channels[0].Entries[1].SkipRange = "<2.0.0" + strings.Repeat(" <2.0.0", 36) },
			`package "p": channel "stable": entry "p.v2": skipRange is 258 characters, over the limit of 256`},
		// 126 comparisons kept from 255 characters (an outside review).
		{"skipRange of many wildcards", func(c *Content) { c.Channels[0].Entries[1].SkipRange = strings.TrimSpace(strings.Repeat("1.x ", 63)) },
			`package "p": channel "stable": entry "p.v2": skipRange makes 126 comparisons, over the limit of 8`},
		{"skipRange of many terms", func(c *Content) {
			c.Channels[0].Entries[1].SkipRange = ">=1.0.0 <2.0.0 || >=3.0.0 <4.0.0 || >=5.0.0 <6.0.0 || >=7.0.0 <8.0.0 || >=9.0.0"
		}, `package "p": channel "stable": entry "p.v2": skipRange makes 9 comparisons, over the limit of 8`},
		{"version over the limit", func(c *Content) {
			c.Bundles[1].Properties = []Property{pkgProp("p", "2.0.0-"+strings.TrimSuffix(strings.Repeat("a.", 62), "."))}
		},
			`package "p": bundle "p.v2": version is 129 characters, over the limit of 128`},
		{"image over the limit", func(c *Content) { c.Bundles[1].Image = "example.com/" + strings.Repeat("a", 4085) },
			`package "p": bundle "p.v2": image is 4097 characters, over the limit of 4096`},
		{"skipRange not a range", func(c *Content) { c.Channels[0].Entries[1].SkipRange = "two" },
			`package "p": channel "stable": entry "p.v2": skipRange "two": Could not get version from string: "two"`},
		{"deprecations of an unknown package", func(c *Content) { c.Deprecations = append(c.Deprecations, Deprecations{Package: "q"}) },
			`olm.deprecations names package "q", which has no olm.package`},
	}
	if _, err := NewIndex(small()); err != nil {
		t.Fatalf("the valid base: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := small()
			tc.mutate(&c)
			_, err := NewIndex(c)
			if err == nil || err.Error() != tc.err {
				t.Fatalf("error\n got: %v\nwant: %s", err, tc.err)
			}
		})
	}
}

// TestNewIndexRealCatalogs indexes the four real packages, alone and
// together, and checks their counts.
func TestNewIndexRealCatalogs(t *testing.T) {
	want := map[string][2]int{ // bundles, channels
		"cat-facts-operator": {4, 1}, "infinispan": {49, 4}, "kube-green": {10, 1}, "sailoperator": {32, 10},
	}
	for name, c := range realCatalogs(t) {
		idx := mustIndex(t, c)
		p := idx.packages[name]
		if got := [2]int{len(p.bundles), len(p.channels)}; got != want[name] {
			t.Errorf("%s: %d bundles, %d channels; want %v", name, got[0], got[1], want[name])
		}
	}
	idx := mustIndex(t, allReal(t))
	if got := idx.Packages(); !slices.Equal(got, realPackages) {
		t.Errorf("packages %v", got)
	}
}

// TestVersionOrder is the order bundles are preferred in, lowest first:
// semver precedence, then the release that registry+v1 bundles write as
// build metadata.
func TestVersionOrder(t *testing.T) {
	ordered := []string{
		"0.9.9",
		"1.0.0-0",
		"1.0.0-alpha",
		"1.0.0-alpha.1",
		"1.0.0-alpha.beta",
		"1.0.0-beta.2",
		"1.0.0-beta.11",
		"1.0.0-rc.1",
		"1.0.0",
		"1.0.0+1",
		"1.0.0+2",
		"1.0.0+10",
		"1.0.0+10.1",
		"1.0.0+git",
		"1.0.1-nightly-2026-08-10",
		"1.0.1-nightly-2026-08-11",
		"1.0.1",
		"1.2.0",
		"1.10.0",
		"2.0.0",
	}
	parsed := make([]versionRelease, len(ordered))
	for i, s := range ordered {
		vr, err := parseVersionRelease(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		parsed[i] = vr
	}
	for i := range parsed {
		for j := range parsed {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := parsed[i].compare(parsed[j]); got != want {
				t.Errorf("compare(%s, %s) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
	// Build metadata that is not a release never orders a version.
	same := []string{"1.0.0", "1.0.0+01", "1.0.0+" + strings.Repeat("a", 21)}
	for _, s := range same[1:] {
		a, _ := parseVersionRelease(same[0])
		b, err := parseVersionRelease(s)
		if err != nil {
			t.Fatal(err)
		}
		if a.compare(b) != 0 {
			t.Errorf("%s and %s should order alike", same[0], s)
		}
	}
	// A release leaves the version a range sees.
	vr, _ := parseVersionRelease("1.0.0+2")
	if got := vr.mastermindsVersion().String(); got != "1.0.0" {
		t.Errorf("range sees %s", got)
	}
	if got := vr.String(); got != "1.0.0+2" {
		t.Errorf("String() = %s", got)
	}
}

// TestResolveReleases: registry+v1 bundles that differ only in the release
// written as build metadata order by it, a range sees the version without
// it, and the installed bundle is matched by version and release.
func TestResolveReleases(t *testing.T) {
	c := Content{
		Packages: []Package{{Name: "r"}},
		Channels: []Channel{{Package: "r", Name: "stable", Entries: []ChannelEntry{
			{Name: "r.1"}, {Name: "r.3", Replaces: "r.2"}, {Name: "r.2", Replaces: "r.1"},
		}}},
		Bundles: []Bundle{bundle("r", "r.1", "1.0.0"), bundle("r", "r.3", "1.0.0+2"), bundle("r", "r.2", "1.0.0+1")},
	}
	cats := []Catalog{{Name: "c", Index: mustIndex(t, c)}}
	cases := []resolveCase{
		{name: "highest release", pkg: "r", want: "r.3", edge: EdgeInitialInstall},
		{name: "range ignores the release", pkg: "r", rng: "1.0.0", want: "r.3", edge: EdgeInitialInstall},
		{name: "next release", pkg: "r", installed: "r.1@1.0.0", rng: "<=1.0.0", want: "r.2", edge: EdgeReplaces},
		{name: "installed by version and release", pkg: "r", installed: "r.3@1.0.0+2", want: "r.3", edge: EdgeInstalled},
		{name: "self-certified keeps the highest release", pkg: "r", policy: SelfCertified, installed: "r.3@1.0.0+2", rng: "<1.0.0 || 1.0.0", want: "r.3", edge: EdgeInstalled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.request(), cats)
			checkCase(t, tc, got, err)
		})
	}
	got, err := Resolve(Request{PackageName: "r"}, cats)
	if err != nil || got.Version != "1.0.0+2" || got.Image != "example.com/r.3" {
		t.Errorf("got %+v, %v", got, err)
	}
}

// TestResolveBundleInNoChannel: a bundle no channel lists is a candidate only
// when no channel is requested, and no upgrade edge leads to it.
func TestResolveBundleInNoChannel(t *testing.T) {
	c := small()
	// Two bundles of one version: the catalog's order breaks the tie, and
	// the version is listed once.
	c.Bundles = append(c.Bundles, bundle("p", "p.v3", "3.0.0"), bundle("p", "p.v3-rebuilt", "3.0.0"))
	cats := []Catalog{{Name: "c", Index: mustIndex(t, c)}}
	cases := []resolveCase{
		{name: "any channel", pkg: "p", want: "p.v3", edge: EdgeInitialInstall},
		{name: "named channel", pkg: "p", channels: "stable", want: "p.v2", edge: EdgeInitialInstall, inChannels: "stable"},
		{name: "no edge to it", pkg: "p", installed: "p.v2@2.0.0", want: "p.v2", edge: EdgeInstalled, unreachable: "3.0.0"},
		{name: "skipRange and replaces on one entry", pkg: "p", installed: "p.v1@1.0.0", want: "p.v2", edge: EdgeReplaces, unreachable: "3.0.0"},
		{name: "self-certified reaches it", pkg: "p", policy: SelfCertified, installed: "p.v1@1.0.0", want: "p.v3", edge: EdgeSelfCertified},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.request(), cats)
			checkCase(t, tc, got, err)
		})
	}
}

// TestInstalledIsTheInstalledBundle: the Installed edge is the installed
// bundle itself, not any bundle of its version: another of that version
// (another image), in the same catalog or in one of higher priority,
// needs an upgrade edge like any other, and among equals the installed
// one stays (an outside review saw a catalog swap the image under
// "Installed").
func TestInstalledIsTheInstalledBundle(t *testing.T) {
	in := &Installed{Name: "p.v1", Version: "1.0.0"}
	same := Content{
		Packages: []Package{{Name: "p", DefaultChannel: "stable"}},
		Channels: []Channel{{Package: "p", Name: "stable", Entries: []ChannelEntry{{Name: "p.v1"}, {Name: "p.other"}}}},
		Bundles:  []Bundle{bundle("p", "p.other", "1.0.0"), bundle("p", "p.v1", "1.0.0")},
	}
	res, err := Resolve(Request{PackageName: "p", Installed: in}, []Catalog{{Name: "c", Index: mustIndex(t, same)}})
	if err != nil || res.Bundle != "p.v1" || res.Edge != EdgeInstalled {
		t.Fatalf("same catalog: %+v, %v; want p.v1 (Installed)", res, err)
	}
	// Even with an upgrade edge of the same version, the installed one stays.
	same.Channels[0].Entries[1].Replaces = "p.v1"
	res, err = Resolve(Request{PackageName: "p", Installed: in}, []Catalog{{Name: "c", Index: mustIndex(t, same)}})
	if err != nil || res.Bundle != "p.v1" {
		t.Fatalf("same version replacing it: %+v, %v; want p.v1", res, err)
	}

	mine := Content{
		Packages: []Package{{Name: "p", DefaultChannel: "stable"}},
		Channels: []Channel{{Package: "p", Name: "stable", Entries: []ChannelEntry{{Name: "p.v1"}}}},
		Bundles:  []Bundle{bundle("p", "p.v1", "1.0.0")},
	}
	other := Content{
		Packages: []Package{{Name: "p", DefaultChannel: "stable"}},
		Channels: []Channel{{Package: "p", Name: "stable", Entries: []ChannelEntry{{Name: "evil"}}}},
		Bundles:  []Bundle{bundle("p", "evil", "1.0.0")},
	}
	res, err = Resolve(Request{PackageName: "p", VersionRange: "1.0.0", Installed: in},
		[]Catalog{{Name: "mine", Index: mustIndex(t, mine)}, {Name: "other", Priority: 1, Index: mustIndex(t, other)}})
	if err != nil || res.Bundle != "p.v1" || res.Catalog != "mine" || res.Edge != EdgeInstalled {
		t.Fatalf("a catalog of higher priority with another bundle of the version: %+v, %v; want p.v1 from mine (Installed)", res, err)
	}
	// The same name and version with another image (a re-review).
	other.Bundles[0].Name, other.Channels[0].Entries[0].Name = "p.v1", "p.v1"
	other.Bundles[0].Image = "evil.example.com/p"
	res, err = Resolve(Request{PackageName: "p", VersionRange: "1.0.0", Installed: &Installed{Name: "p.v1", Version: "1.0.0", Image: "example.com/p.v1"}},
		[]Catalog{{Name: "mine", Index: mustIndex(t, mine)}, {Name: "other", Priority: 1, Index: mustIndex(t, other)}})
	if err != nil || res.Image != "example.com/p.v1" || res.Catalog != "mine" || res.Edge != EdgeInstalled {
		t.Fatalf("a catalog of higher priority with the installed name and version at another image: %+v, %v; want example.com/p.v1 from mine (Installed)", res, err)
	}
}
