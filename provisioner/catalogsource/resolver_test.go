package catalogsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/catalog/fbc"
	"github.com/rukpak-dev/rukpak/catalog/resolve"
)

// pkgDoc is a package document as the content service serves it.
func pkgDoc(versions ...string) string {
	var sb strings.Builder
	sb.WriteString(`{"schema":"olm.package","name":"p","defaultChannel":"stable"}` + "\n")
	var entries []string
	prev := ""
	for _, v := range versions {
		e := fmt.Sprintf(`{"name":"p.v%s"`, v)
		if prev != "" {
			e += fmt.Sprintf(`,"replaces":"p.v%s"`, prev)
		}
		entries = append(entries, e+"}")
		prev = v
	}
	sb.WriteString(`{"schema":"olm.channel","package":"p","name":"stable","entries":[` + strings.Join(entries, ",") + "]}\n")
	for _, v := range versions {
		fmt.Fprintf(&sb, `{"schema":"olm.bundle","package":"p","name":"p.v%s","image":"r/p@sha256:%s","properties":[{"type":"olm.package","value":{"packageName":"p","version":"%s"}}]}`+"\n", v, v, v)
	}
	return sb.String()
}

type fakeOpener struct {
	docs  map[string]string // catalog/package
	err   error
	reads int
}

func (f *fakeOpener) OpenPackage(_ context.Context, name, pkg string) (io.ReadCloser, error) {
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	d, ok := f.docs[name+"/"+pkg]
	if !ok {
		return nil, fmt.Errorf("%s/%s: %w", name, pkg, fs.ErrNotExist)
	}
	return io.NopCloser(strings.NewReader(d)), nil
}

func catalog(name, digest string, priority int32, serving bool, labels map[string]string) *rukpakv1alpha1.Catalog {
	status := metav1.ConditionFalse
	if serving {
		status = metav1.ConditionTrue
	}
	return &rukpakv1alpha1.Catalog{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       rukpakv1alpha1.CatalogSpec{Priority: priority},
		Status: rukpakv1alpha1.CatalogStatus{ContentDigest: digest, Conditions: []metav1.Condition{{
			Type: rukpakv1alpha1.TypeServing, Status: status, Reason: "x", LastTransitionTime: metav1.Now(),
		}}},
	}
}

func TestResolve(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := rukpakv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		catalog("main", "sha256:1", 0, true, map[string]string{"tier": "main"}),
		catalog("extra", "sha256:2", 5, true, map[string]string{"tier": "extra"}),
		catalog("broken", "", 9, false, map[string]string{"tier": "broken"}),
	).Build()
	op := &fakeOpener{docs: map[string]string{"main/p": pkgDoc("1.0.0", "1.1.0", "2.0.0"), "extra/p": pkgDoc("1.0.0", "1.2.0")}}
	r := &Resolver{Catalogs: c, Opener: op, Cache: NewCache(1 << 20), MaxPackageBytes: 4096}
	ctx := context.Background()
	sel := func(tier string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"tier": tier}}
	}
	for _, tc := range []struct {
		name      string
		src       rukpakv1alpha1.CatalogSource
		installed *resolve.Installed
		want      string // bundle, or an error's words
	}{
		{"highest priority among serving catalogs", rukpakv1alpha1.CatalogSource{PackageName: "p", Version: "1.x"}, nil, "extra:p.v1.2.0"},
		{"selector", rukpakv1alpha1.CatalogSource{PackageName: "p", Selector: sel("main")}, nil, "main:p.v2.0.0"},
		{"successor of the installed bundle", rukpakv1alpha1.CatalogSource{PackageName: "p", Selector: sel("main")}, &resolve.Installed{Name: "p.v1.0.0", Version: "1.0.0"}, "main:p.v1.1.0"},
		{"self-certified", rukpakv1alpha1.CatalogSource{PackageName: "p", Selector: sel("main"), UpgradeConstraintPolicy: rukpakv1alpha1.UpgradeConstraintPolicySelfCertified}, &resolve.Installed{Name: "p.v1.0.0", Version: "1.0.0"}, "main:p.v2.0.0"},
		{"no match", rukpakv1alpha1.CatalogSource{PackageName: "p", Version: ">=9"}, nil, `catalog "extra": 2 bundles, 0 in channels and range; catalog "main": 3 bundles, 0 in channels and range`},
		{"absent package", rukpakv1alpha1.CatalogSource{PackageName: "q"}, nil, `catalog "extra": no package "q"`},
		{"selector matching nothing", rukpakv1alpha1.CatalogSource{PackageName: "p", Selector: sel("gold")}, nil, `no Catalog matches selector "tier=gold"`},
		{"no serving catalog", rukpakv1alpha1.CatalogSource{PackageName: "p", Selector: sel("broken")}, nil, `no Catalog that matches selector "tier=broken" is serving (not serving: broken)`},
		{"invalid range", rukpakv1alpha1.CatalogSource{PackageName: "p", Version: "banana"}, nil, "version: not a version range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := r.Resolve(ctx, &tc.src, tc.installed)
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got = res.Catalog + ":" + res.Bundle
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	// Each catalog's package was read once (main/p, extra/p, and q,
	// absent, from each): the rest came from the cache.
	if op.reads != 4 {
		t.Fatalf("%d reads, want 4", op.reads)
	}
}

func TestResolveFailures(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := rukpakv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(catalog("main", "sha256:1", 0, true, nil)).Build()
	src := &rukpakv1alpha1.CatalogSource{PackageName: "p"}
	ctx := context.Background()

	_, err := (&Resolver{Catalogs: c, Opener: &fakeOpener{err: errors.New("connection refused")}}).Resolve(ctx, src, nil)
	var transient *TransientError
	if !errors.As(err, &transient) || !strings.Contains(err.Error(), `reading package "p" of catalog "main": connection refused`) {
		t.Fatalf("unreachable content service: %v", err)
	}
	_, err = (&Resolver{Catalogs: c, Opener: &fakeOpener{docs: map[string]string{"main/p": pkgDoc("1.0.0")}}, MaxPackageBytes: 100}).Resolve(ctx, src, nil)
	if errors.As(err, &transient) || !strings.Contains(err.Error(), "package document too large: over 100 bytes") {
		t.Fatalf("oversized document: %v", err)
	}
	_, err = (&Resolver{Catalogs: c}).Resolve(ctx, src, nil)
	if err == nil || !strings.Contains(err.Error(), "not configured to read catalogs") {
		t.Fatalf("no opener: %v", err)
	}
}

func TestCacheBound(t *testing.T) {
	idx, err := resolve.NewIndex(resolve.Content{})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCache(64 << 10)
	for i := range 100 {
		c.Add(Key{Catalog: fmt.Sprint(i), Digest: "d", Package: "p"}, idx, 1)
	}
	if c.Len() != 16 { // 64 KiB of 4 KiB minimum entries
		t.Fatalf("%d entries, want 16", c.Len())
	}
	c.Add(Key{Catalog: "huge", Digest: "d", Package: "p"}, idx, 17<<10)
	if _, ok := c.Get(Key{Catalog: "huge", Digest: "d", Package: "p"}); ok {
		t.Fatal("an entry over a quarter of the bound was kept")
	}
	c.Add(Key{Catalog: "99", Digest: "new", Package: "p"}, idx, 1)
	if _, ok := c.Get(Key{Catalog: "99", Digest: "d", Package: "p"}); ok {
		t.Fatal("an older digest of the same catalog package was kept")
	}
	var nilCache *Cache
	nilCache.Add(Key{}, idx, 1)
	if _, ok := nilCache.Get(Key{}); ok {
		t.Fatal("a nil cache kept something")
	}
}

// sharedResolver resolves against one catalog of a package of n versions.
func sharedResolver(tb testing.TB, n int) (*Resolver, *fakeOpener) {
	tb.Helper()
	scheme := runtime.NewScheme()
	if err := rukpakv1alpha1.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	versions := make([]string, n)
	for i := range versions {
		versions[i] = fmt.Sprintf("1.%d.0", i)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(catalog("main", "sha256:1", 0, true, nil)).Build()
	op := &fakeOpener{docs: map[string]string{"main/p": pkgDoc(versions...)}}
	return &Resolver{Catalogs: c, Opener: op, Cache: NewCache(DefaultCacheBytes), MaxPackageBytes: DefaultMaxPackageBytes}, op
}

// A thousand BundleDeployments of one package, each at its own installed
// version, resolve against one index: the package is read and indexed
// once, not per BundleDeployment.
func TestResolveSharesIndex(t *testing.T) {
	r, op := sharedResolver(t, 1000)
	ctx := context.Background()
	for i := range 1000 {
		v := fmt.Sprintf("1.%d.0", i)
		res, err := r.Resolve(ctx, &rukpakv1alpha1.CatalogSource{PackageName: "p"}, &resolve.Installed{Name: "p.v" + v, Version: v})
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("p.v1.%d.0", min(i+1, 999))
		if res.Bundle != want {
			t.Fatalf("installed %s resolved to %s, want %s", v, res.Bundle, want)
		}
	}
	if op.reads != 1 {
		t.Fatalf("%d reads of the package for 1,000 resolutions, want 1", op.reads)
	}
}

// BenchmarkResolveShared is one BundleDeployment's resolution when the
// catalog's index is already built (by another BundleDeployment of the
// package): what each of 1,000 BundleDeployments of one catalog costs.
func BenchmarkResolveShared(b *testing.B) {
	r, op := sharedResolver(b, 1000)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		v := fmt.Sprintf("1.%d.0", i%1000)
		if _, err := r.Resolve(ctx, &rukpakv1alpha1.CatalogSource{PackageName: "p", Version: ">=1.0.0 <2"}, &resolve.Installed{Name: "p.v" + v, Version: v}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(op.reads), "package-reads")
}

// TestCacheChargesIndexSize: an index is charged at its estimated size
// when that is above its document's (parsing makes more of some text
// than the text: an outside review built 2.4 GiB of index from a 34.7 MiB
// package charged at its 34.7): one over a quarter of the cache is not
// kept, however small its document.
func TestCacheChargesIndexSize(t *testing.T) {
	r, op := sharedResolver(t, 1000)
	doc := int64(len(op.docs["main/p"]))
	p, err := fbc.ParsePackage(strings.NewReader(op.docs["main/p"]), "p", DefaultMaxPackageBytes)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := resolve.NewIndex(resolve.FromPackages(p))
	if err != nil {
		t.Fatal(err)
	}
	if idx.Size() <= doc {
		t.Fatalf("the index's estimate %d is not above its document's %d bytes: no test", idx.Size(), doc)
	}
	// A quarter of the bound between the two.
	r.Cache = NewCache(2 * (doc + idx.Size()))
	ctx := context.Background()
	for range 2 {
		if _, err := r.Resolve(ctx, &rukpakv1alpha1.CatalogSource{PackageName: "p"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if op.reads != 2 {
		t.Fatalf("%d reads for two resolutions, want 2: an index over a quarter of the cache was kept (document %d bytes)", op.reads, doc)
	}
	r.Cache = NewCache(DefaultCacheBytes)
	for range 2 {
		if _, err := r.Resolve(ctx, &rukpakv1alpha1.CatalogSource{PackageName: "p"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if op.reads != 3 {
		t.Fatalf("%d reads, want 3: the index was not kept by a cache it fits", op.reads)
	}
}
