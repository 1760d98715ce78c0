package resolve

import (
	"fmt"
	"runtime"
	"testing"
)

// copies is the four real packages and n renamed copies of them, as one
// catalog content (n=500: 2,004 packages, 47,595 bundles).
func copies(b *testing.B, n int) Content {
	real := allReal(b)
	parts := []Content{real}
	for i := range n {
		parts = append(parts, renamed(real, fmt.Sprintf("-%d", i)))
	}
	return merge(parts...)
}

var benchRequests = []struct {
	name string
	req  Request
}{
	{"initial", Request{PackageName: "kube-green", VersionRange: ">=0.5 <1"}},
	{"skipRange", Request{PackageName: "sailoperator", Channels: []string{"stable"},
		Installed: &Installed{Name: "sailoperator.v1.26.0", Version: "1.26.0"}}},
	{"unreachable", Request{PackageName: "infinispan", Channels: []string{"stable", "2.3.x"}, VersionRange: ">=2.3 <3",
		Installed: &Installed{Name: "infinispan-operator.v2.3.0", Version: "2.3.0"}}},
}

// BenchmarkResolve is one resolution against a catalog of 10 and of 500
// renamed copies of the real packages, in two catalogs of different
// priority that both hold the package.
func BenchmarkResolve(b *testing.B) {
	for _, n := range []int{10, 500} {
		idx := mustIndex(b, copies(b, n))
		other := mustIndex(b, allReal(b))
		cats := []Catalog{{Name: "community", Index: idx}, {Name: "mirror", Priority: -1, Index: other}}
		for _, br := range benchRequests {
			b.Run(fmt.Sprintf("copies=%d/%s", n, br.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Resolve(br.req, cats); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkNewIndex builds the index of 10 and 500 renamed copies, once per
// catalog content, and reports the heap the index keeps (retained-B).
func BenchmarkNewIndex(b *testing.B) {
	for _, n := range []int{10, 500} {
		c := copies(b, n)
		b.Run(fmt.Sprintf("copies=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var idx *Index
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for b.Loop() {
				var err error
				if idx, err = NewIndex(c); err != nil {
					b.Fatal(err)
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc)-float64(before.HeapAlloc), "retained-B")
			runtime.KeepAlive(idx)
		})
	}
}

// BenchmarkResolveHugePackage is the worst case the bounds allow: a package
// of 50,000 entries, each with a skipRange, and a walk that stops at its
// check limit.
func BenchmarkResolveHugePackage(b *testing.B) {
	cats := []Catalog{{Name: "huge", Index: mustIndex(b, huge(hugeEntries, true))}}
	req := Request{PackageName: "huge", Installed: &Installed{Name: "huge.v1.0.0", Version: "1.0.0"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Resolve(req, cats); err != nil {
			b.Fatal(err)
		}
	}
}
