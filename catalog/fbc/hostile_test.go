package fbc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/rukpak-dev/rukpak/internal/heapwatch"
)

const (
	pkgBlob    = `{"schema":"olm.package","name":"p","defaultChannel":"stable"}`
	bundleBlob = `{"schema":"olm.bundle","package":"p","name":"p.v%[1]d","image":"example.com/p@sha256:%064[1]d","properties":[{"type":"olm.package","value":{"packageName":"p","version":"%[1]d.0.0"}}]}`
)

func bundles(n int) string {
	var s []string
	for i := 1; i <= n; i++ {
		s = append(s, fmt.Sprintf(bundleBlob, i))
	}
	return strings.Join(s, "\n")
}

// catalog is a one-file JSON catalog of package p with bundles p.v1..p.vN
// and the given channel blob.
func catalog(channel string, n int) fstest.MapFS {
	return fstest.MapFS{"c.json": {Data: []byte(pkgBlob + "\n" + channel + "\n" + bundles(n))}}
}

func TestBuildAccepts(t *testing.T) {
	for _, tc := range []struct {
		name string
		fsys fstest.MapFS
		want func(t *testing.T, dir string, x *Index)
	}{{
		name: "replaces of a bundle not in the catalog, skips, skipRange",
		fsys: catalog(`{"schema":"olm.channel","package":"p","name":"stable","entries":[{"name":"p.v1","replaces":"p.v0"},{"name":"p.v2","replaces":"p.v1","skips":["p.v3"],"skipRange":">=0.1.0 <2.0.0"},{"name":"p.v3","replaces":"p.v1"}]}`, 3),
	}, {
		name: "unknown schemas are carried through, with and without a package",
		fsys: fstest.MapFS{"c.json": {Data: []byte(pkgBlob + `{"schema":"example.com/note","package":"p","text":"hi"}` + `{"schema":"olm.channel","package":"p","name":"stable","entries":[{"name":"p.v1"}]}` + bundles(1) + `{"schema":"example.com/global"}`)}},
		want: func(t *testing.T, dir string, x *Index) {
			doc, _ := os.ReadFile(filepath.Join(dir, DocumentFile))
			if !bytes.Contains(doc, []byte(`"text":"hi"`)) || x.Others.Length == 0 || !strings.HasPrefix(string(doc[x.Others.Offset:]), `{"schema":"example.com/global"}`) {
				t.Fatalf("unknown schemas not carried: index %+v\n%s", x, doc)
			}
		},
	}, {
		name: "YAML, several files, .indexignore",
		fsys: fstest.MapFS{
			"p/index.yaml":       {Data: []byte("---\nschema: olm.package\nname: p\ndefaultChannel: stable\n---\n# only a comment\n---\nschema: olm.channel\npackage: p\nname: stable\nentries:\n- name: p.v1\n")},
			"p/bundles.json":     {Data: []byte(bundles(1))},
			"p/.indexignore":     {Data: []byte("# not catalog content\nobjects/\n*.md.yaml\n")},
			"p/objects/csv.yaml": {Data: []byte("kind: ClusterServiceVersion\n")},
			"p/README.md.yaml":   {Data: []byte("not: a blob\n")},
			"p/LICENSE":          {Data: []byte("text")},
		},
	}, {
		name: "only configs/ is read when there is one",
		fsys: fstest.MapFS{
			"configs/p/catalog.json": {Data: []byte(pkgBlob + `{"schema":"olm.channel","package":"p","name":"stable","entries":[{"name":"p.v1"}]}` + bundles(1))},
			"manifests/x.yaml":       {Data: []byte("kind: Deployment\n")},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			x, err := Build(tc.fsys, dir, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if x.Counts.Packages != 1 {
				t.Fatalf("counts %+v", x.Counts)
			}
			if tc.want != nil {
				tc.want(t, dir, x)
			}
		})
	}
}

func TestBuildRefuses(t *testing.T) {
	stable := func(entries string) string {
		return `{"schema":"olm.channel","package":"p","name":"stable","entries":[` + entries + `]}`
	}
	deep := func(n int) string {
		return `{"schema":"x","v":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
	}
	manyEntries := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"name":"p.v%d"}`, i)
		}
		return stable(b.String())
	}
	tinyBlobs := bytes.Repeat([]byte(`{"schema":"a"}`+"\n"), 2_000_000)
	kubeGreen := os.DirFS(filepath.Join(testdata(t), "kube-green"))
	// The heap's objects include garbage not yet collected: collect at
	// every 10% of growth over the test data, so the peak is close to what
	// a Build holds at once.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	for _, tc := range []struct {
		name   string
		fsys   fstest.MapFS
		dirFS  bool
		limits Limits
		want   string
	}{
		{name: "replaces cycle", fsys: catalog(stable(`{"name":"p.v1","replaces":"p.v2"},{"name":"p.v2","replaces":"p.v1"},{"name":"p.v3","replaces":"p.v2"}`), 3),
			want: `c.json: blob 2 (olm.channel "stable" of package "p"): replaces cycle: p.v1 -> p.v2 -> p.v1`},
		{name: "two heads", fsys: catalog(stable(`{"name":"p.v1"},{"name":"p.v2"}`), 2),
			want: `c.json: blob 2 (olm.channel "stable" of package "p"): has 2 heads, needs exactly one: p.v1, p.v2`},
		{name: "two heads by a fork", fsys: catalog(stable(`{"name":"p.v1"},{"name":"p.v2","replaces":"p.v1"},{"name":"p.v3","skips":["p.v1"],"replaces":"p.v2"},{"name":"p.v4","replaces":"p.v1"}`), 4),
			want: `has 2 heads`},
		{name: "stranded behind a skip", fsys: catalog(stable(`{"name":"p.v1"},{"name":"p.v2","replaces":"p.v1"},{"name":"p.v3","skips":["p.v4"],"replaces":"p.v1"},{"name":"p.v4","replaces":"p.v2"}`), 4),
			want: `stranded entries (not on the replaces chain from head "p.v3", nor skipped by an entry on it): p.v2`},
		{name: "entry is not a bundle of the package", fsys: catalog(stable(`{"name":"q.v1"}`), 1),
			want: `entry "q.v1" is not an olm.bundle of package "p"`},
		{name: "entry twice", fsys: catalog(stable(`{"name":"p.v1"},{"name":"p.v1"}`), 1), want: `entry "p.v1" appears more than once`},
		{name: "bad skipRange", fsys: catalog(stable(`{"name":"p.v1","skipRange":"not a range"}`), 1), want: `entry "p.v1": skipRange "not a range"`},
		{name: "bundle in no channel", fsys: catalog(stable(`{"name":"p.v1"}`), 2), want: `c.json: blob 4 (olm.bundle "p.v2" of package "p"): is in no channel`},
		{name: "default channel missing", fsys: fstest.MapFS{"c.json": {Data: []byte(`{"schema":"olm.package","name":"p","defaultChannel":"fast"}` + stable(`{"name":"p.v1"}`) + bundles(1))}},
			want: `defaultChannel "fast" is not a channel of the package`},
		{name: "no olm.package", fsys: fstest.MapFS{"c.json": {Data: []byte(stable(`{"name":"p.v1"}`) + bundles(1))}},
			want: `c.json: blob 1 (olm.channel "stable" of package "p"): package "p" has no olm.package blob`},
		{name: "duplicate package", fsys: fstest.MapFS{"a.json": {Data: []byte(pkgBlob)}, "b.json": {Data: []byte(pkgBlob + stable(`{"name":"p.v1"}`) + bundles(1))}},
			want: `b.json: blob 1 (olm.package "p"): duplicate package, first defined at a.json: blob 1`},
		{name: "bundle without version", fsys: fstest.MapFS{"c.json": {Data: []byte(pkgBlob + stable(`{"name":"p.v1"}`) + `{"schema":"olm.bundle","package":"p","name":"p.v1","image":"i","properties":[]}`)}},
			want: `has 0 olm.package properties, needs exactly one`},
		{name: "property without value", fsys: fstest.MapFS{"c.json": {Data: []byte(`{"schema":"x","properties":[{"type":"t"}]}`)}},
			want: `c.json: blob 1 (x): properties[0] (t) has no value`},
		{name: "deprecation of a missing bundle", fsys: fstest.MapFS{"c.json": {Data: []byte(pkgBlob + stable(`{"name":"p.v1"}`) + bundles(1) + `{"schema":"olm.deprecations","package":"p","entries":[{"reference":{"schema":"olm.bundle","name":"p.v9"},"message":"old"}]}`)}},
			want: `c.json: blob 4 (olm.deprecations of package "p"): entries[0] deprecates olm.bundle "p.v9", which the package does not have`},
		{name: "no schema: a plain bundle is not a catalog", fsys: fstest.MapFS{"manifests/deploy.yaml": {Data: []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n")}},
			want: `manifests/deploy.yaml: blob 1: has no schema (is this a file-based catalog?)`},
		{name: "no blobs at all", fsys: fstest.MapFS{"bin/tool": {Data: []byte("\x7fELF")}, "README": {Data: []byte("hello")}},
			want: `not a file-based catalog: no blobs in 0 .json/.yaml/.yml files under the content root`},
		{name: "a registry+v1 bundle directory beside a catalog", dirFS: true,
			want: `bundles/0.3.0/manifests/`},
		{name: "top-level JSON array", fsys: fstest.MapFS{"c.json": {Data: []byte(`[{"schema":"x"}]`)}}, want: `c.json: blob 1: is not a JSON object`},
		{name: "truncated JSON", fsys: fstest.MapFS{"c.json": {Data: []byte(`{"schema":"x"`)}}, want: `c.json: blob 1: ends in the middle of a JSON value`},
		{name: "deep JSON", fsys: fstest.MapFS{"c.json": {Data: []byte(deep(100_000))}}, want: `c.json: blob 1: is nested more than 64 levels deep`},
		{name: "deep YAML", fsys: fstest.MapFS{"c.yaml": {Data: []byte("schema: x\nv: " + strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000) + "\n")}},
			want: `c.yaml: blob 1: is nested more than 64 levels deep`},
		{name: "deep YAML the scan does not see", fsys: fstest.MapFS{"c.yaml": {Data: []byte("schema: x\nk: a - 'x\nj: [ # ]\n" + strings.Repeat(" [ # ]\n", 80) + " x\n" + strings.Repeat("]", 81) + "\n")}},
			want: `c.yaml: blob 1: is nested more than 64 levels deep`},
		{name: "YAML alias bomb", fsys: fstest.MapFS{"c.yaml": {Data: []byte(aliasBomb())}},
			want: `c.yaml: blob 1: expands to more than 262144 YAML nodes through aliases`},
		{name: "one huge blob", fsys: fstest.MapFS{"c.json": {Data: []byte(`{"schema":"x","v":"` + strings.Repeat("a", 9<<20) + `"}`)}},
			want: `c.json: blob 1: is larger than 8388608 bytes`},
		{name: "one huge YAML blob", fsys: fstest.MapFS{"c.yaml": {Data: []byte("schema: x\nv: " + strings.Repeat("a", 9<<20) + "\n")}},
			want: `c.yaml: blob 1: is larger than 8388608 bytes`},
		{name: "files too large together", limits: Limits{MaxTotalBytes: 1 << 20}, fsys: fstest.MapFS{"a.json": {Data: bytes.Repeat([]byte(`{"schema":"x"}`), 50_000)}, "b.json": {Data: bytes.Repeat([]byte(`{"schema":"x"}`), 50_000)}},
			want: `the catalog's files are larger than 1048576 bytes together`},
		{name: "millions of tiny blobs", fsys: fstest.MapFS{"c.json": {Data: tinyBlobs}},
			want: `c.json: blob 100001: the catalog has more than 100000 blobs`},
		{name: "huge entry count", fsys: catalog(manyEntries(250_000), 1),
			want: `c.json: blob 2 (olm.channel "stable" of package "p"): the catalog has more than 100000 channel entries and skips`},
		{name: "long name", fsys: fstest.MapFS{"c.json": {Data: []byte(`{"schema":"x","name":"` + strings.Repeat("n", 2000) + `"}`)}},
			want: `c.json: blob 1: a name is longer than 1024 bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			peak, allocs, took := heapwatch.Measure(func() {
				if tc.dirFS {
					_, err = Build(kubeGreen, t.TempDir(), tc.limits)
				} else {
					_, err = Build(tc.fsys, t.TempDir(), tc.limits)
				}
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v\nwant one containing %q", err, tc.want)
			}
			t.Logf("%s, live heap +%.1f MiB, %.1f MiB allocated: %.300s", took.Round(time.Millisecond), float64(peak)/(1<<20), float64(allocs)/(1<<20), err)
		})
	}
}

// aliasBomb is the "billion laughs" in YAML: a few hundred bytes that
// expand to 10^9 nodes.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("schema: x\na0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	return b.String()
}
