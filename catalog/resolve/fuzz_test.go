package resolve

import (
	"errors"
	"testing"

	mmsemver "github.com/Masterminds/semver/v3"
)

// FuzzResolveRequest feeds arbitrary requests to the real packages: every
// answer is a result that honours the request or one of the two typed
// errors, never a panic.
func FuzzResolveRequest(f *testing.F) {
	f.Add("infinispan", "2.3.x", ">=2.3 <3", "infinispan-operator.v2.3.0", "2.3.0", false)
	f.Add("sailoperator", "", ">=1.31.0-0", "sailoperator.v1.30.3", "1.30.3", false)
	f.Add("kube-green", "alpha", "^0.5 || ~0.7", "kube-green.v0.5.0", "0.5.0+1", true)
	f.Add("kube-green", "", "", "", "", false)
	f.Add("cat-facts-operator", "stable", "1.1.x", "x", "1.0.0-0", false)
	f.Add("kube-green", "alpha", "<=0.x", "kube-green.v0.3.0", "v0.3.0", false)
	cats := []Catalog{
		{Name: "community", Index: mustIndex(f, allReal(f))},
		{Name: "mirror", Priority: -1, Index: mustIndex(f, mirrored(realCatalogs(f)["kube-green"], "mirror.example"))},
	}
	f.Fuzz(func(t *testing.T, pkg, channel, rng, installedName, installedVersion string, selfCertified bool) {
		req := Request{PackageName: pkg, VersionRange: rng}
		if channel != "" {
			req.Channels = []string{channel}
		}
		if installedName != "" || installedVersion != "" {
			req.Installed = &Installed{Name: installedName, Version: installedVersion}
		}
		if selfCertified {
			req.Policy = SelfCertified
		}
		res, err := Resolve(req, cats)
		if err != nil {
			var reqErr *RequestError
			var resErr *ResolutionError
			if !errors.As(err, &reqErr) && !errors.As(err, &resErr) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		if rng != "" {
			c, err := mmsemver.NewConstraint(rng)
			if err != nil {
				t.Fatalf("resolved with a range that does not parse: %v", err)
			}
			v := cats[0].Index.packages[pkg].bundles[cats[0].Index.packages[pkg].byName[res.Bundle]].mm
			if !c.Check(v) {
				t.Fatalf("%s (%s) is outside %q", res.Bundle, res.Version, rng)
			}
		}
		if channel != "" && (len(res.Channels) != 1 || res.Channels[0] != channel) {
			t.Fatalf("%s in channels %v, asked %q", res.Bundle, res.Channels, channel)
		}
		if req.Installed == nil && res.Edge != EdgeInitialInstall {
			t.Fatalf("edge %s with nothing installed", res.Edge)
		}
		if len(res.Unreachable) > MaxUnreachableListed || res.UnreachableTotal < len(res.Unreachable) {
			t.Fatalf("unreachable %d listed of %d", len(res.Unreachable), res.UnreachableTotal)
		}
	})
}

// FuzzNewIndex feeds arbitrary versions and skipRanges to the index and
// resolves against what it accepts: refusals are errors, never panics.
func FuzzNewIndex(f *testing.F) {
	f.Add("2.0.0", "<2.0.0", "1.0.0")
	f.Add("2.0.0+1.2", ">=2.1.x <2.2.1", "2.1.9")
	f.Add("1.31.0-nightly-2026-08-22", ">=1.0.0 <1.31.0-nightly-2026-08-22 || 0.x", "1.30.3")
	f.Add("2.0.0", "<=x", "2.0.0+01")
	f.Fuzz(func(t *testing.T, version, skipRange, installed string) {
		c := small()
		c.Bundles[1].Properties = []Property{pkgProp("p", version)}
		c.Channels[0].Entries[1].SkipRange = skipRange
		idx, err := NewIndex(c)
		if err != nil {
			return
		}
		for _, policy := range []Policy{CatalogProvided, SelfCertified} {
			_, err := Resolve(Request{PackageName: "p", Policy: policy, Installed: &Installed{Name: "p.v1", Version: installed}},
				[]Catalog{{Name: "c", Index: idx}})
			var reqErr *RequestError
			var resErr *ResolutionError
			if err != nil && !errors.As(err, &reqErr) && !errors.As(err, &resErr) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
		}
	})
}
