package resolve

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

const hugeEntries = 50_000

// huge is one package of n bundles in one channel, each replacing the one
// before; with skipRanges every entry also carries a skipRange that holds no
// version of the package, the shape that makes a reachability walk check
// every pair.
func huge(n int, skipRanges bool) Content {
	c := Content{Packages: []Package{{Name: "huge", DefaultChannel: "stable"}}}
	ch := Channel{Package: "huge", Name: "stable", Entries: make([]ChannelEntry, n)}
	c.Bundles = make([]Bundle, n)
	for i := range n {
		name := fmt.Sprintf("huge.v1.0.%d", i)
		c.Bundles[i] = bundle("huge", name, fmt.Sprintf("1.0.%d", i))
		e := ChannelEntry{Name: name}
		if i > 0 {
			e.Replaces = fmt.Sprintf("huge.v1.0.%d", i-1)
		}
		if skipRanges {
			e.SkipRange = "<0.0.1"
		}
		ch.Entries[i] = e
	}
	c.Channels = []Channel{ch}
	return c
}

// TestResolveHugePackage resolves in a package of 50,000 entries: each
// resolution is one pass over the package, and the reachability walk stops at
// its check limit when skipRanges would make it quadratic.
func TestResolveHugePackage(t *testing.T) {
	plain := []Catalog{{Name: "huge", Index: mustIndex(t, huge(hugeEntries, false))}}
	hostile := []Catalog{{Name: "huge", Index: mustIndex(t, huge(hugeEntries, true))}}
	last := fmt.Sprintf("huge.v1.0.%d", hugeEntries-1)
	first := &Installed{Name: "huge.v1.0.0", Version: "1.0.0"}

	res, err := Resolve(Request{PackageName: "huge"}, hostile)
	if err != nil || res.Bundle != last || res.Edge != EdgeInitialInstall {
		t.Fatalf("initial install: %+v, %v", res, err)
	}
	res, err = Resolve(Request{PackageName: "huge", VersionRange: "~1.0.0 <1.0.100"}, hostile)
	if err != nil || res.Bundle != "huge.v1.0.99" {
		t.Fatalf("ranged install: %+v, %v", res, err)
	}
	res, err = Resolve(Request{PackageName: "huge", Installed: first}, plain)
	if err != nil || res.Bundle != "huge.v1.0.1" || res.Edge != EdgeReplaces || len(res.Unreachable) != 0 || res.UnreachableIncomplete {
		t.Fatalf("upgrade along 50,000 replaces: %s %s unreachable %d incomplete %v, %v", res.Bundle, res.Edge, len(res.Unreachable), res.UnreachableIncomplete, err)
	}
	res, err = Resolve(Request{PackageName: "huge", Installed: first}, hostile)
	if err != nil || res.Bundle != "huge.v1.0.1" || res.Edge != EdgeReplaces {
		t.Fatalf("upgrade with 50,000 skipRanges: %+v, %v", res, err)
	}
	if !res.UnreachableIncomplete {
		t.Errorf("the walk over 50,000 skipRanges did not stop at %d checks", MaxReachabilityChecks)
	}
	// The walk got as far as its checks allow: the versions it had no
	// budget for are counted, the lowest of them listed.
	if n := res.UnreachableTotal; n == 0 || n >= hugeEntries-1 || len(res.Unreachable) != MaxUnreachableListed {
		t.Errorf("%d versions unreachable, %d listed", n, len(res.Unreachable))
	}
	// Without a path, everything above the installed version is unreachable.
	res, err = Resolve(Request{PackageName: "huge", Channels: []string{"stable"}, VersionRange: "1.0.0 || >=1.0.2",
		Installed: first}, plain)
	if err != nil {
		t.Fatal(err)
	}
	if res.Edge != EdgeInstalled || res.UnreachableTotal != hugeEntries-2 || res.UnreachableIncomplete ||
		res.Unreachable[0] != "1.0.2" || res.Unreachable[MaxUnreachableListed-1] != "1.0.65" {
		t.Fatalf("cut chain: %s %s, %d unreachable, listed %v", res.Bundle, res.Edge, res.UnreachableTotal, res.Unreachable)
	}
	// Every channel of the limit, none of them in the package.
	chans := make([]string, MaxChannels)
	for i := range chans {
		chans[i] = fmt.Sprintf("channel-%d-%s", i, strings.Repeat("x", 200))
	}
	_, err = Resolve(Request{PackageName: "huge", Channels: chans, Installed: first}, hostile)
	if want := `(catalog "huge": 50000 bundles, 0 in channels and range, 0 of them successors of installed bundle "huge.v1.0.0")`; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("got %v, want an error ending %s", err, want)
	}
	_, err = Resolve(Request{PackageName: "huge", Channels: append(chans, "one-more")}, hostile)
	if want := "channels: has 257 channels, over the limit of 256"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	_, err = Resolve(Request{PackageName: "huge", Channels: []string{strings.Repeat("c", MaxNameLength+1)}}, hostile)
	if want := "channels[0]: must be 1 to 253 characters"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	_, err = Resolve(Request{PackageName: strings.Repeat("p", MaxNameLength+1)}, hostile)
	if want := "packageName: is 254 characters, over the limit of 253"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	_, err = Resolve(Request{PackageName: "huge", Installed: &Installed{Name: "x", Version: "1.0.0-" + strings.Repeat("a", MaxVersionLength)}}, hostile)
	if want := "installed.version: is 134 characters, over the limit of 128"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

// bytesPerRun is the heap allocated by one call of f, averaged over runs.
func bytesPerRun(runs int, f func()) uint64 {
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}

// TestResolveAllocationBound: a resolution allocates the same whatever the
// size of the catalog around the package, a bounded amount for the real
// packages, and within the 8 MiB target for a package of 50,000 entries.
func TestResolveAllocationBound(t *testing.T) {
	real := allReal(t)
	one := []Catalog{{Name: "c", Index: mustIndex(t, real)}}
	parts := []Content{real}
	for i := range 100 {
		parts = append(parts, renamed(real, fmt.Sprintf("-%d", i)))
	}
	many := []Catalog{{Name: "c", Index: mustIndex(t, merge(parts...))}}
	reqs := []Request{
		{PackageName: "infinispan", Channels: []string{"stable", "2.4.x"}, VersionRange: ">=2.3 <3", Installed: &Installed{Name: "infinispan-operator.v2.3.0", Version: "2.3.0"}},
		{PackageName: "sailoperator", Installed: &Installed{Name: "sailoperator.v1.26.0", Version: "1.26.0"}},
		{PackageName: "kube-green", VersionRange: "^0.5"},
	}
	const maxAllocs = 200
	for _, req := range reqs {
		resolve := func(cats []Catalog) func() {
			return func() {
				if _, err := Resolve(req, cats); err != nil {
					t.Fatal(err)
				}
			}
		}
		small := testing.AllocsPerRun(50, resolve(one))
		large := testing.AllocsPerRun(50, resolve(many))
		if small != large || large > maxAllocs {
			t.Errorf("%s: %v allocations in 4 packages, %v in 404; want equal and at most %d", req.PackageName, small, large, maxAllocs)
		}
		t.Logf("%s: %v allocations, %d bytes", req.PackageName, large, bytesPerRun(50, resolve(many)))
	}
	hugeCats := []Catalog{{Name: "huge", Index: mustIndex(t, huge(hugeEntries, false))}}
	req := Request{PackageName: "huge", Installed: &Installed{Name: "huge.v1.0.0", Version: "1.0.0"}, VersionRange: ">=1.0.0"}
	b := bytesPerRun(5, func() {
		if _, err := Resolve(req, hugeCats); err != nil {
			t.Fatal(err)
		}
	})
	if b > 8<<20 {
		t.Errorf("a resolution in 50,000 entries allocated %d bytes, over 8 MiB", b)
	}
	t.Logf("huge: %d bytes", b)
}

// TestResolveRenamedCopies: in a catalog of renamed copies (the benchmarks'
// catalog) each copy resolves as the original does.
func TestResolveRenamedCopies(t *testing.T) {
	real := allReal(t)
	parts := []Content{real}
	for i := range 10 {
		parts = append(parts, renamed(real, fmt.Sprintf("-%d", i)))
	}
	cats := []Catalog{{Name: "c", Index: mustIndex(t, merge(parts...))}}
	for _, br := range benchRequests {
		want, err := Resolve(br.req, cats)
		if err != nil {
			t.Fatal(err)
		}
		req := br.req
		req.PackageName += "-7"
		if req.Installed != nil {
			req.Installed = &Installed{Name: req.Installed.Name + "-7", Version: req.Installed.Version}
		}
		got, err := Resolve(req, cats)
		if err != nil {
			t.Fatal(err)
		}
		if got.Bundle != want.Bundle+"-7" || got.Edge != want.Edge || strings.Join(got.Unreachable, ",") != strings.Join(want.Unreachable, ",") {
			t.Errorf("%s: %s %s %v, want %s-7 %s %v", br.name, got.Bundle, got.Edge, got.Unreachable, want.Bundle, want.Edge, want.Unreachable)
		}
	}
}

// TestIndexSizeBoundsItsHeap: an index's Size is at least the heap it
// holds (strings included), for plain packages and the shapes that parse
// into more than their text (long pre-release versions, skipRanges of
// many comparisons, many skips); content over MaxIndexBytes is refused
// before it is held. A 34.7 MiB package of wildcard skipRanges held 2.4
// GiB before (an outside review).
func TestIndexSizeBoundsItsHeap(t *testing.T) {
	shapes := map[string]func(i int) (version, skipRange string, skips []string){
		"plain": func(i int) (string, string, []string) { return fmt.Sprintf("1.0.%d", i), "", nil },
		"skipRange": func(i int) (string, string, []string) {
			return fmt.Sprintf("1.0.%d", i), fmt.Sprintf(">=1.0.0 <1.0.%d", i), nil
		},
		"8 compared": func(i int) (string, string, []string) {
			return fmt.Sprintf("1.0.%d", i), strings.Repeat(fmt.Sprintf(">=1.0.0 <1.0.%d ", i), 4), nil
		},
		"wildcards": func(i int) (string, string, []string) { return fmt.Sprintf("1.0.%d", i), "1.x 2.x 3.x 4.x", nil },
		"pre-release": func(i int) (string, string, []string) {
			return fmt.Sprintf("1.0.%d-", i) + strings.Repeat("a.", 58) + "a", "", nil
		},
		"skips": func(i int) (string, string, []string) {
			return fmt.Sprintf("1.0.%d", i), "", strings.Fields("a b c d e f g h")
		},
		"distinct skips": func(i int) (string, string, []string) {
			var skips []string
			for j := range 8 {
				skips = append(skips, fmt.Sprintf("s%d.%d", i, j))
			}
			return fmt.Sprintf("1.0.%d", i), "", skips
		},
	}
	const n = 10_000
	for name, shape := range shapes {
		t.Run(name, func(t *testing.T) {
			// The strings as a decoder makes them: the index's own.
			c := Content{Packages: []Package{{Name: "p"}}}
			entries := make([]ChannelEntry, n)
			for i := range n {
				v, r, skips := shape(i)
				bn := fmt.Sprintf("p.v%d", i)
				c.Bundles = append(c.Bundles, bundle("p", bn, v))
				entries[i] = ChannelEntry{Name: bn, SkipRange: r, Skips: skips}
			}
			c.Channels = []Channel{{Package: "p", Name: "a", Entries: entries}}
			var strs int
			for _, b := range c.Bundles {
				strs += len(b.Name) + len(b.Image) + len(b.Properties[0].Value)
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			idx, err := NewIndex(c)
			if err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			// The content stays alive to here: the growth is the index's
			// own, and the strings it shares with the content count too.
			runtime.KeepAlive(c)
			held := int64(after.HeapAlloc) - int64(before.HeapAlloc) + int64(strs)
			t.Logf("%s: %d bytes held per bundle, %d estimated", name, held/n, idx.Size()/n)
			if idx.Size() < held {
				t.Errorf("Size %d is below the %d bytes held", idx.Size(), held)
			}
			runtime.KeepAlive(idx)
		})
	}

	t.Run("over the limit", func(t *testing.T) {
		c := Content{Packages: []Package{{Name: "p"}}}
		long := strings.Repeat("a.", 58) + "a" // 117 characters of pre-release
		for i := range MaxIndexBytes/(versionCharCost*len(long)) + 1 {
			c.Bundles = append(c.Bundles, bundle("p", fmt.Sprintf("p.v%d", i), fmt.Sprintf("1.0.%d-%s", i, long)))
		}
		_, err := NewIndex(c)
		if want := fmt.Sprintf(`package "p": the index of this content would hold more than %d MiB (estimated), over the limit`, MaxIndexBytes>>20); err == nil || err.Error() != want {
			t.Fatalf("error %v, want %q", err, want)
		}
	})
}
