package resolve

import (
	"slices"
	"strings"
	"testing"
)

func inst(nameAtVersion string) *Installed {
	if nameAtVersion == "" {
		return nil
	}
	name, version, _ := strings.Cut(nameAtVersion, "@")
	return &Installed{Name: name, Version: version}
}

type resolveCase struct {
	name        string
	pkg         string
	channels    string // comma-separated
	rng         string
	policy      Policy
	installed   string // name@version
	want        string // bundle name
	edge        Edge
	inChannels  string // comma-separated
	unreachable string // comma-separated
	err         string // exact message
}

func (tc resolveCase) request() Request {
	return Request{
		PackageName:  tc.pkg,
		Channels:     names(tc.channels),
		VersionRange: tc.rng,
		Policy:       tc.policy,
		Installed:    inst(tc.installed),
	}
}

func checkCase(t *testing.T, tc resolveCase, got *Result, err error) {
	t.Helper()
	if tc.err != "" {
		if err == nil {
			t.Fatalf("resolved %s (%s), want error %q", got.Bundle, got.Edge, tc.err)
		}
		if err.Error() != tc.err {
			t.Fatalf("error\n got: %s\nwant: %s", err, tc.err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if got.Bundle != tc.want || got.Edge != tc.edge {
		t.Errorf("resolved %s (%s), want %s (%s)", got.Bundle, got.Edge, tc.want, tc.edge)
	}
	if tc.inChannels != "" && !slices.Equal(got.Channels, names(tc.inChannels)) {
		t.Errorf("channels %v, want %v", got.Channels, names(tc.inChannels))
	}
	if !slices.Equal(got.Unreachable, names(tc.unreachable)) || got.UnreachableTotal != len(got.Unreachable) {
		t.Errorf("unreachable %v (%d), want %v", got.Unreachable, got.UnreachableTotal, names(tc.unreachable))
	}
	if got.UnreachableIncomplete {
		t.Errorf("unreachable walk incomplete")
	}
}

// TestResolveRealPackages resolves the four real packages of the community
// catalog as OLM v1 does: each policy, ranges in the syntax users write,
// channels, replaces, skips and skipRange edges, and failures.
func TestResolveRealPackages(t *testing.T) {
	catalogs := []Catalog{{Name: "community", Index: mustIndex(t, allReal(t))}}
	const kg, cf, inf, sail = "kube-green", "cat-facts-operator", "infinispan", "sailoperator"
	cases := []resolveCase{
		// kube-green: one channel, a replaces chain 0.3.0 -> 0.7.1.
		{name: "initial install takes the highest", pkg: kg, want: "kube-green.v0.7.1", edge: EdgeInitialInstall, inChannels: "alpha"},
		{name: "x range", pkg: kg, rng: "0.5.x", want: "kube-green.v0.5.2", edge: EdgeInitialInstall},
		{name: "bounded range", pkg: kg, rng: ">=0.4 <0.6", want: "kube-green.v0.5.2", edge: EdgeInitialInstall},
		{name: "comma range", pkg: kg, rng: ">=0.4, <0.6", want: "kube-green.v0.5.2", edge: EdgeInitialInstall},
		{name: "tilde range", pkg: kg, rng: "~0.4", want: "kube-green.v0.4.1", edge: EdgeInitialInstall},
		{name: "caret range below 1", pkg: kg, rng: "^0.6", want: "kube-green.v0.6.0", edge: EdgeInitialInstall},
		{name: "or range", pkg: kg, rng: "0.3.0 || 0.4.0", want: "kube-green.v0.4.0", edge: EdgeInitialInstall},
		{name: "exact version", pkg: kg, rng: "0.4.1", want: "kube-green.v0.4.1", edge: EdgeInitialInstall},
		{name: "named channel", pkg: kg, channels: "alpha", want: "kube-green.v0.7.1", edge: EdgeInitialInstall, inChannels: "alpha"},
		{name: "replaces from installed", pkg: kg, installed: "kube-green.v0.5.0@0.5.0", want: "kube-green.v0.5.1", edge: EdgeReplaces},
		{name: "installed is the head", pkg: kg, installed: "kube-green.v0.7.1@0.7.1", want: "kube-green.v0.7.1", edge: EdgeInstalled},
		{name: "stays when the successor is out of range", pkg: kg, rng: "0.5.0 || >=0.7", installed: "kube-green.v0.5.0@0.5.0",
			want: "kube-green.v0.5.0", edge: EdgeInstalled, unreachable: "0.7.0,0.7.1"},
		{name: "self-certified jumps", pkg: kg, rng: ">=0.6", policy: SelfCertified, installed: "kube-green.v0.5.0@0.5.0", want: "kube-green.v0.7.1", edge: EdgeSelfCertified},
		{name: "self-certified downgrades", pkg: kg, rng: "0.4.x", policy: SelfCertified, installed: "kube-green.v0.7.1@0.7.1", want: "kube-green.v0.4.1", edge: EdgeSelfCertified},
		{name: "self-certified stays", pkg: kg, rng: "0.5.0", policy: SelfCertified, installed: "kube-green.v0.5.0@0.5.0", want: "kube-green.v0.5.0", edge: EdgeInstalled},
		{name: "no successor in range", pkg: kg, rng: ">=0.6", installed: "kube-green.v0.5.0@0.5.0",
			err: `no bundle of package "kube-green" for version range ">=0.6" in any channel after installed bundle "kube-green.v0.5.0" (version 0.5.0, policy CatalogProvided) (catalog "community": 10 bundles, 3 in channels and range, 0 of them successors of installed bundle "kube-green.v0.5.0")`},
		{name: "no downgrade", pkg: kg, rng: "<0.5.0", installed: "kube-green.v0.5.0@0.5.0",
			err: `no bundle of package "kube-green" for version range "<0.5.0" in any channel after installed bundle "kube-green.v0.5.0" (version 0.5.0, policy CatalogProvided) (catalog "community": 10 bundles, 4 in channels and range, 0 of them successors of installed bundle "kube-green.v0.5.0")`},
		{name: "installed bundle unknown to the catalog", pkg: kg, installed: "kube-green.v0.2.0@0.2.0",
			err: `no bundle of package "kube-green" for any version in any channel after installed bundle "kube-green.v0.2.0" (version 0.2.0, policy CatalogProvided) (catalog "community": 10 bundles, 10 in channels and range, 0 of them successors of installed bundle "kube-green.v0.2.0")`},
		{name: "channel the package lacks", pkg: kg, channels: "stable",
			err: `no bundle of package "kube-green" for any version in channels ["stable"] (catalog "community": 10 bundles, 0 in channels and range)`},
		{name: "version the package lacks", pkg: kg, rng: "1.0.0", channels: "alpha",
			err: `no bundle of package "kube-green" for version range "1.0.0" in channels ["alpha"] (catalog "community": 10 bundles, 0 in channels and range)`},

		// cat-facts-operator: replaces plus skips.
		{name: "skips beat replaces by version", pkg: cf, installed: "cat-facts-operator.v1.0.0@1.0.0", want: "cat-facts-operator.v1.1.1", edge: EdgeSkips},
		{name: "replaces named with skips", pkg: cf, rng: "<1.1.1", installed: "cat-facts-operator.v1.0.0@1.0.0", want: "cat-facts-operator.v1.1.0", edge: EdgeReplaces},
		{name: "replaces after a skip target", pkg: cf, installed: "cat-facts-operator.v1.1.0@1.1.0", want: "cat-facts-operator.v1.1.1", edge: EdgeReplaces},
		{name: "cat-facts initial", pkg: cf, want: "cat-facts-operator.v1.1.2", edge: EdgeInitialInstall, inChannels: "stable"},
		{name: "cat-facts at the head", pkg: cf, installed: "cat-facts-operator.v1.1.2@1.1.2", want: "cat-facts-operator.v1.1.2", edge: EdgeInstalled},

		// infinispan: four channels, skips and skipRange.
		{name: "infinispan highest in any channel", pkg: inf, want: "infinispan-operator.v2.5.14", edge: EdgeInitialInstall, inChannels: "stable"},
		{name: "infinispan channel 2.4.x", pkg: inf, channels: "2.4.x", want: "infinispan-operator.v2.4.18", edge: EdgeInitialInstall, inChannels: "2.4.x"},
		{name: "infinispan channel 2.2.x", pkg: inf, channels: "2.2.x", want: "infinispan-operator.v2.2.5", edge: EdgeInitialInstall, inChannels: "2.2.x"},
		{name: "infinispan two channels", pkg: inf, channels: "2.2.x,2.3.x", want: "infinispan-operator.v2.3.8", edge: EdgeInitialInstall, inChannels: "2.3.x"},
		{name: "bundle in two channels", pkg: inf, rng: "2.4.x", want: "infinispan-operator.v2.4.18", edge: EdgeInitialInstall, inChannels: "2.4.x,stable"},
		{name: "x skipRange", pkg: inf, channels: "2.2.x", installed: "infinispan-operator.v2.2.0@2.2.0", want: "infinispan-operator.v2.2.5", edge: EdgeSkipRange},
		{name: "skipRange to the head", pkg: inf, channels: "stable", installed: "infinispan-operator.v2.5.6@2.5.6", want: "infinispan-operator.v2.5.14", edge: EdgeSkipRange},
		{name: "skipRange within range", pkg: inf, rng: "<2.5.10", installed: "infinispan-operator.v2.5.6@2.5.6", want: "infinispan-operator.v2.5.9", edge: EdgeSkipRange},
		{name: "replaces beats skipRange on one entry", pkg: inf, rng: "2.5.7", installed: "infinispan-operator.v2.5.6@2.5.6", want: "infinispan-operator.v2.5.7", edge: EdgeReplaces},
		{name: "skips leave versions unreachable", pkg: inf, channels: "2.3.x", installed: "infinispan-operator.v2.3.0@2.3.0", want: "infinispan-operator.v2.3.8", edge: EdgeSkips,
			unreachable: "2.3.1,2.3.2,2.3.3,2.3.4,2.3.5,2.3.6,2.3.7"},
		{name: "skips then the stable chain", pkg: inf, channels: "stable", rng: "<2.4.0", installed: "infinispan-operator.v2.3.0@2.3.0", want: "infinispan-operator.v2.3.8", edge: EdgeSkips,
			unreachable: "2.3.1,2.3.2,2.3.3,2.3.4,2.3.5,2.3.6,2.3.7"},
		{name: "replaces in two channels", pkg: inf, installed: "infinispan-operator.v2.4.5@2.4.5", want: "infinispan-operator.v2.4.6", edge: EdgeReplaces, inChannels: "2.4.x,stable"},
		{name: "replaces in the named channel", pkg: inf, channels: "2.4.x", installed: "infinispan-operator.v2.4.5@2.4.5", want: "infinispan-operator.v2.4.6", edge: EdgeReplaces, inChannels: "2.4.x"},
		{name: "no edge between channels", pkg: inf, channels: "stable", installed: "infinispan-operator.v2.2.5@2.2.5",
			err: `no bundle of package "infinispan" for any version in channels ["stable"] after installed bundle "infinispan-operator.v2.2.5" (version 2.2.5, policy CatalogProvided) (catalog "community": 49 bundles, 43 in channels and range, 0 of them successors of installed bundle "infinispan-operator.v2.2.5")`},
		{name: "self-certified across channels", pkg: inf, channels: "stable", rng: "~2.4", policy: SelfCertified, installed: "infinispan-operator.v2.2.5@2.2.5", want: "infinispan-operator.v2.4.18", edge: EdgeSelfCertified},
		{name: "infinispan range above all", pkg: inf, rng: ">=3",
			err: `no bundle of package "infinispan" for version range ">=3" in any channel (catalog "community": 49 bundles, 0 in channels and range)`},

		// sailoperator: pre-releases, ten channels, skipRange everywhere.
		{name: "pre-release is highest without a range", pkg: sail, want: "sailoperator.v1.31.0-nightly-2026-08-22", edge: EdgeInitialInstall, inChannels: "1.31-nightly"},
		{name: "range excludes pre-releases", pkg: sail, rng: ">=1.0", want: "sailoperator.v1.30.3", edge: EdgeInitialInstall, inChannels: "stable,stable-1.30"},
		{name: "pre-release range", pkg: sail, rng: ">=1.31.0-0", want: "sailoperator.v1.31.0-nightly-2026-08-22", edge: EdgeInitialInstall},
		{name: "release beats its rc", pkg: sail, channels: "candidates", want: "sailoperator.v0.1.0", edge: EdgeInitialInstall},
		{name: "exact pre-release", pkg: sail, rng: "0.1.0-rc.1", want: "sailoperator.v0.1.0-rc.1", edge: EdgeInitialInstall, inChannels: "candidates"},
		{name: "skipRange along stable", pkg: sail, channels: "stable", installed: "sailoperator.v1.26.0@1.26.0", want: "sailoperator.v1.30.3", edge: EdgeSkipRange},
		{name: "skipRange within a minor channel", pkg: sail, channels: "stable-1.26", installed: "sailoperator.v1.26.0@1.26.0", want: "sailoperator.v1.26.3", edge: EdgeSkipRange},
		{name: "from the previous minor", pkg: sail, channels: "stable-1.26", installed: "sailoperator.v1.25.2@1.25.2", want: "sailoperator.v1.26.3", edge: EdgeSkipRange},
		{name: "single-entry channel", pkg: sail, channels: "stable-1.0", installed: "sailoperator.v1.0.0@1.0.0", want: "sailoperator.v1.0.0", edge: EdgeInstalled},
		{name: "skipRange into nightlies", pkg: sail, installed: "sailoperator.v1.30.3@1.30.3", want: "sailoperator.v1.31.0-nightly-2026-08-22", edge: EdgeSkipRange},
		{name: "range keeps release", pkg: sail, rng: ">=1.30", installed: "sailoperator.v1.30.3@1.30.3", want: "sailoperator.v1.30.3", edge: EdgeInstalled},
		{name: "rc replaced", pkg: sail, channels: "candidates", installed: "sailoperator.v0.1.0-rc.1@0.1.0-rc.1", want: "sailoperator.v0.1.0", edge: EdgeReplaces},
		{name: "two minor channels", pkg: sail, channels: "stable-1.29,stable-1.30", installed: "sailoperator.v1.29.0@1.29.0", want: "sailoperator.v1.30.3", edge: EdgeSkipRange, inChannels: "stable-1.30"},

		// Requests refused before any catalog is read.
		{name: "invalid range", pkg: kg, rng: "foobar", err: `version: not a version range: improper constraint: "foobar"`},
		{name: "range over the limit", pkg: kg, rng: ">=0.1.0 " + strings.Repeat("<9", 28) + "9", err: "version: is 65 characters, over the limit of 64"},
		{name: "unknown policy", pkg: kg, policy: "Whatever", err: `upgradeConstraintPolicy: "Whatever" is neither CatalogProvided nor SelfCertified`},
		{name: "installed version not semver", pkg: kg, installed: "kube-green.v0.5@0.5", err: `installed.version: "0.5" is not a semver version: No Major.Minor.Patch elements found`},
		{name: "unknown package", pkg: "nope", err: `no bundle of package "nope" for any version in any channel (catalog "community": no package "nope")`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.request(), catalogs)
			checkCase(t, tc, got, err)
		})
	}
}
