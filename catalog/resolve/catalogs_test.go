package resolve

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
)

// mirrored copies c with every image moved to registry, as a mirror catalog
// of the same package would publish it.
func mirrored(c Content, registry string) Content {
	out := c
	out.Bundles = make([]Bundle, len(c.Bundles))
	for i, b := range c.Bundles {
		b.Image = registry + "/" + b.Name
		out.Bundles[i] = b
	}
	return out
}

// upTo keeps the bundles and entries of c at or below the bundle named last
// in chain order (kube-green's single channel).
func upTo(c Content, last string) Content {
	out := c
	out.Channels = nil
	for _, ch := range c.Channels {
		n := slices.IndexFunc(ch.Entries, func(e ChannelEntry) bool { return e.Name == last })
		ch.Entries = ch.Entries[:n+1]
		out.Channels = append(out.Channels, ch)
	}
	out.Bundles = nil
	for _, b := range c.Bundles {
		out.Bundles = append(out.Bundles, b)
		if b.Name == last {
			break
		}
	}
	return out
}

func TestResolveDeprecations(t *testing.T) {
	rc := realCatalogs(t)
	kg := withDeprecations(rc["kube-green"], "kube-green",
		DeprecationEntry{Schema: SchemaPackage, Message: "kube-green moves to a new package"},
		DeprecationEntry{Schema: SchemaChannel, Name: "alpha", Message: "alpha is frozen"},
		DeprecationEntry{Schema: SchemaBundle, Name: "kube-green.v0.7.1", Message: "0.7.1 breaks sleep schedules; use 0.7.0"},
		DeprecationEntry{Schema: SchemaBundle, Name: "kube-green.v0.5.0", Message: "0.5.0 leaks memory"},
		DeprecationEntry{Schema: SchemaBundle, Name: "kube-green.v9.9.9", Message: "not in the catalog"},
		DeprecationEntry{Schema: "olm.unknown", Name: "x", Message: "ignored"},
	)
	inf := withDeprecations(rc["infinispan"], "infinispan",
		DeprecationEntry{Schema: SchemaChannel, Name: "2.2.x", Message: "2.2.x is end of life"},
	)
	catalogs := []Catalog{{Name: "community", Index: mustIndex(t, merge(kg, inf))}}
	pkgDep := Deprecation{ScopePackage, "kube-green", "kube-green moves to a new package"}
	chDep := Deprecation{ScopeChannel, "alpha", "alpha is frozen"}
	cases := []struct {
		name string
		resolveCase
		deprecations []Deprecation
	}{
		{name: "deprecated bundle sorts last", resolveCase: resolveCase{pkg: "kube-green", want: "kube-green.v0.7.0", edge: EdgeInitialInstall},
			deprecations: []Deprecation{pkgDep, chDep}},
		{name: "deprecated bundle is still picked alone", resolveCase: resolveCase{pkg: "kube-green", rng: "0.7.1", want: "kube-green.v0.7.1", edge: EdgeInitialInstall},
			deprecations: []Deprecation{pkgDep, chDep, {ScopeBundle, "kube-green.v0.7.1", "0.7.1 breaks sleep schedules; use 0.7.0"}}},
		{name: "installed bundle deprecated", resolveCase: resolveCase{pkg: "kube-green", channels: "alpha", installed: "kube-green.v0.5.0@0.5.0", want: "kube-green.v0.5.1", edge: EdgeReplaces},
			deprecations: []Deprecation{pkgDep, chDep, {ScopeInstalledBundle, "kube-green.v0.5.0", "0.5.0 leaks memory"}}},
		{name: "staying beats a deprecated successor", resolveCase: resolveCase{pkg: "kube-green", installed: "kube-green.v0.7.0@0.7.0", want: "kube-green.v0.7.0", edge: EdgeInstalled},
			deprecations: []Deprecation{pkgDep, chDep}},
		// Reported once: the installed bundle is the bundle.
		{name: "staying on a deprecated bundle", resolveCase: resolveCase{pkg: "kube-green", installed: "kube-green.v0.5.0@0.5.0", rng: "0.5.0", want: "kube-green.v0.5.0", edge: EdgeInstalled},
			deprecations: []Deprecation{pkgDep, chDep, {ScopeBundle, "kube-green.v0.5.0", "0.5.0 leaks memory"}}},
		{name: "requested channel deprecated", resolveCase: resolveCase{pkg: "infinispan", channels: "2.2.x,2.4.x", want: "infinispan-operator.v2.4.18", edge: EdgeInitialInstall},
			deprecations: []Deprecation{{ScopeChannel, "2.2.x", "2.2.x is end of life"}}},
		{name: "deprecated channel the bundle is in", resolveCase: resolveCase{pkg: "infinispan", rng: "2.2.x", want: "infinispan-operator.v2.2.5", edge: EdgeInitialInstall},
			deprecations: []Deprecation{{ScopeChannel, "2.2.x", "2.2.x is end of life"}}},
		{name: "deprecated channel elsewhere", resolveCase: resolveCase{pkg: "infinispan", want: "infinispan-operator.v2.5.14", edge: EdgeInitialInstall}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.request(), catalogs)
			checkCase(t, tc.resolveCase, got, err)
			if !slices.Equal(got.Deprecations, tc.deprecations) {
				t.Errorf("deprecations\n got: %+v\nwant: %+v", got.Deprecations, tc.deprecations)
			}
		})
	}
}

func TestResolveAcrossCatalogs(t *testing.T) {
	rc := realCatalogs(t)
	kg := rc["kube-green"]
	community := mustIndex(t, allReal(t))
	mirror := mustIndex(t, mirrored(kg, "mirror.example"))
	old := mustIndex(t, mirrored(upTo(kg, "kube-green.v0.6.0"), "old.example"))
	depMirror := mustIndex(t, withDeprecations(mirrored(kg, "mirror.example"), "kube-green",
		DeprecationEntry{Schema: SchemaBundle, Name: "kube-green.v0.7.1", Message: "do not use"}))
	depCommunity := mustIndex(t, withDeprecations(kg, "kube-green",
		DeprecationEntry{Schema: SchemaBundle, Name: "kube-green.v0.7.1", Message: "do not use either"}))
	empty := mustIndex(t, Content{})

	cases := []struct {
		name     string
		catalogs []Catalog
		req      Request
		catalog  string
		image    string
		err      string
	}{
		{name: "equal priority both match",
			catalogs: []Catalog{{Name: "mirror", Index: mirror}, {Name: "community", Index: community}},
			req:      Request{PackageName: "kube-green"},
			err:      `package "kube-green" has bundles for any version in any channel in catalogs of the same priority ["community", "mirror"]; give one catalog a higher priority (catalog "mirror", priority 0: kube-green.v0.7.1; catalog "community", priority 0: kube-green.v0.7.1)`},
		{name: "higher priority wins", catalogs: []Catalog{{Name: "community", Index: community}, {Name: "mirror", Priority: 10, Index: mirror}},
			req: Request{PackageName: "kube-green"}, catalog: "mirror", image: "mirror.example/kube-green.v0.7.1"},
		{name: "negative priority loses", catalogs: []Catalog{{Name: "community", Priority: -1, Index: community}, {Name: "mirror", Index: mirror}},
			req: Request{PackageName: "kube-green"}, catalog: "mirror", image: "mirror.example/kube-green.v0.7.1"},
		{name: "priority beats a higher version", catalogs: []Catalog{{Name: "community", Index: community}, {Name: "old", Priority: 1, Index: old}},
			req: Request{PackageName: "kube-green"}, catalog: "old", image: "old.example/kube-green.v0.6.0"},
		{name: "only one catalog matches the range", catalogs: []Catalog{{Name: "community", Index: community}, {Name: "old", Priority: 100, Index: old}},
			req: Request{PackageName: "kube-green", VersionRange: ">=0.7"}, catalog: "community", image: "quay.io/community-operator-pipeline-prod/kube-green@sha256:6a3babd5a11f00ce3786a1a2c7f7543ee72b4fe41d10a4e184a566da36b75bd0"},
		{name: "not deprecated beats priority", catalogs: []Catalog{{Name: "community", Index: community}, {Name: "mirror", Priority: 10, Index: depMirror}},
			req: Request{PackageName: "kube-green", VersionRange: "0.7.1"}, catalog: "community"},
		{name: "both deprecated: priority", catalogs: []Catalog{{Name: "community", Index: depCommunity}, {Name: "mirror", Priority: 10, Index: depMirror}},
			req: Request{PackageName: "kube-green", VersionRange: "0.7.1"}, catalog: "mirror"},
		{name: "deprecated losers do not tie",
			catalogs: []Catalog{{Name: "a", Index: depCommunity}, {Name: "b", Index: depMirror}, {Name: "c", Index: community}},
			req:      Request{PackageName: "kube-green", VersionRange: "0.7.1"}, catalog: "c"},
		{name: "highest of three priorities", catalogs: []Catalog{{Name: "a", Priority: 5, Index: community}, {Name: "b", Priority: 10, Index: mirror}, {Name: "c", Priority: 5, Index: old}},
			req: Request{PackageName: "kube-green"}, catalog: "b"},
		{name: "tie at the top of three",
			catalogs: []Catalog{{Name: "a", Priority: 10, Index: community}, {Name: "b", Priority: 10, Index: old}, {Name: "c", Priority: 5, Index: mirror}},
			req:      Request{PackageName: "kube-green"},
			err:      `package "kube-green" has bundles for any version in any channel in catalogs of the same priority ["a", "b"]; give one catalog a higher priority (catalog "a", priority 10: kube-green.v0.7.1; catalog "b", priority 10: kube-green.v0.6.0)`},
		{name: "package in one catalog only", catalogs: []Catalog{{Name: "empty", Priority: 50, Index: empty}, {Name: "community", Index: community}},
			req: Request{PackageName: "infinispan", Channels: []string{"2.4.x"}}, catalog: "community"},
		{name: "counts per catalog",
			catalogs: []Catalog{{Name: "community", Index: community}, {Name: "old", Index: old}, {Name: "empty", Index: empty}},
			req:      Request{PackageName: "kube-green", VersionRange: ">=0.6", Installed: &Installed{Name: "kube-green.v0.5.0", Version: "0.5.0"}},
			err:      `no bundle of package "kube-green" for version range ">=0.6" in any channel after installed bundle "kube-green.v0.5.0" (version 0.5.0, policy CatalogProvided) (catalog "community": 10 bundles, 3 in channels and range, 0 of them successors of installed bundle "kube-green.v0.5.0"; catalog "old": 8 bundles, 1 in channels and range, 0 of them successors of installed bundle "kube-green.v0.5.0"; catalog "empty": no package "kube-green")`},
		{name: "no catalogs", req: Request{PackageName: "kube-green"},
			err: `no bundle of package "kube-green" for any version in any channel (no catalogs)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.req, tc.catalogs)
			if tc.err != "" {
				var re *ResolutionError
				if !errors.As(err, &re) {
					t.Fatalf("got %v, %v; want a *ResolutionError", got, err)
				}
				if err.Error() != tc.err {
					t.Fatalf("error\n got: %s\nwant: %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Catalog != tc.catalog || (tc.image != "" && got.Image != tc.image) {
				t.Errorf("resolved %s %s from %q, want %s from %q", got.Bundle, got.Image, got.Catalog, tc.image, tc.catalog)
			}
		})
	}
}

func TestResolveFlagsDependencies(t *testing.T) {
	c := realCatalogs(t)["kube-green"]
	c.Bundles = slices.Clone(c.Bundles)
	last := &c.Bundles[len(c.Bundles)-1]
	last.Properties = append(slices.Clone(last.Properties),
		Property{Type: "olm.gvk.required", Value: []byte(`{"group":"monitoring.coreos.com","kind":"ServiceMonitor","version":"v1"}`)},
		Property{Type: "olm.package.required", Value: []byte(`{"packageName":"prometheus","versionRange":">=0.47.0"}`)},
		Property{Type: "olm.gvk.required", Value: []byte(`{"group":"x","kind":"Y","version":"v1"}`)},
	)
	cats := []Catalog{{Name: "community", Index: mustIndex(t, c)}}
	got, err := Resolve(Request{PackageName: "kube-green"}, cats)
	if err != nil {
		t.Fatal(err)
	}
	if got.Bundle != "kube-green.v0.7.1" || !slices.Equal(got.Dependencies, []string{"olm.gvk.required", "olm.package.required"}) {
		t.Errorf("resolved %s with dependencies %v", got.Bundle, got.Dependencies)
	}
	got, err = Resolve(Request{PackageName: "kube-green", VersionRange: "<0.7.1"}, cats)
	if err != nil {
		t.Fatal(err)
	}
	if got.Dependencies != nil {
		t.Errorf("resolved %s with dependencies %v", got.Bundle, got.Dependencies)
	}
}

// TestResolveConcurrently shares one Index between goroutines; run with
// -race to check that resolution never writes to it.
func TestResolveConcurrently(t *testing.T) {
	cats := []Catalog{{Name: "community", Index: mustIndex(t, allReal(t))}}
	reqs := []Request{
		{PackageName: "infinispan", Installed: &Installed{Name: "infinispan-operator.v2.3.0", Version: "2.3.0"}, Channels: []string{"2.3.x"}},
		{PackageName: "sailoperator", Installed: &Installed{Name: "sailoperator.v1.26.0", Version: "1.26.0"}},
		{PackageName: "kube-green", VersionRange: ">=0.5 <0.7"},
	}
	want := make([]string, len(reqs))
	for i, r := range reqs {
		res, err := Resolve(r, cats)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = res.Bundle + " " + strings.Join(res.Unreachable, ",")
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				r := reqs[(g+i)%len(reqs)]
				res, err := Resolve(r, cats)
				if err != nil {
					errs <- err.Error()
					return
				}
				if got := res.Bundle + " " + strings.Join(res.Unreachable, ","); got != want[(g+i)%len(reqs)] {
					errs <- got
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
