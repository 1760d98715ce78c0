package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rukpak-dev/rukpak/catalog/resolve"
	"github.com/rukpak-dev/rukpak/internal/testcatalog"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
)

// catalogDir copies the shared test data's catalogs of pkgs into a new
// directory, one subdirectory each (the shared data is read-only).
func catalogDir(t *testing.T, pkgs ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range pkgs {
		data, err := os.ReadFile(filepath.Join(testcatalog.Dir(), p, "catalog.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p, "catalog.yaml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runCatalog(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := newRootCmd(&out)
	cmd.SetArgs(append([]string{"catalog"}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestCatalogList(t *testing.T) {
	all := catalogDir(t, testcatalog.Packages...)
	cases := []struct {
		name string
		args []string
		want string
	}{{
		name: "packages",
		args: []string{"list", all},
		want: `PACKAGE             DEFAULT CHANNEL  CHANNELS  BUNDLES  LATEST
cat-facts-operator  stable           1         4        1.1.2
infinispan          stable           4         49       2.5.14
kube-green          alpha            1         10       0.7.1
sailoperator        stable           10        32       1.31.0-nightly-2026-08-22
`,
	}, {
		name: "kube-green's channel: its head and versions in order",
		args: []string{"list", all, "--package", "kube-green"},
		want: `Package:          kube-green
Catalog:          ` + all + `
Default channel:  alpha
Bundles:          10

CHANNEL  HEAD               VERSIONS
alpha    kube-green.v0.7.1  0.3.0 0.3.1 0.4.0 0.4.1 0.5.0 0.5.1 0.5.2 0.6.0 0.7.0 0.7.1
`,
	}, {
		name: "infinispan's channels",
		args: []string{"list", all, "--package", "infinispan"},
		want: `CHANNEL  HEAD                         VERSIONS
2.2.x    infinispan-operator.v2.2.5   2.2.0 2.2.1 2.2.2 2.2.3 2.2.4 2.2.5
2.3.x    infinispan-operator.v2.3.8   2.3.0 2.3.1 2.3.2 2.3.3 2.3.4 2.3.5 2.3.6 2.3.7 2.3.8
2.4.x    infinispan-operator.v2.4.18  2.3.0 2.3.1 2.3.2 2.3.3 2.3.4 2.3.5 2.3.6 2.3.7 2.3.8 2.4.0 2.4.1 2.4.2 2.4.3 2.4.4 2.4.5 2.4.6 2.4.7 2.4.8 2.4.9 2.4.10 2.4.11 2.4.12 2.4.13 2.4.14 2.4.15 2.4.16 2.4.17 2.4.18
stable   infinispan-operator.v2.5.14  2.3.0 2.3.1 2.3.2 2.3.3 2.3.4 2.3.5 2.3.6 2.3.7 2.3.8 2.4.0 2.4.1 2.4.2 2.4.3 2.4.4 2.4.5 2.4.6 2.4.7 2.4.8 2.4.9 2.4.10 2.4.11 2.4.12 2.4.13 2.4.14 2.4.15 2.4.16 2.4.17 2.4.18 2.5.0 2.5.1 2.5.2 2.5.3 2.5.4 2.5.5 2.5.6 2.5.7 2.5.8 2.5.9 2.5.10 2.5.11 2.5.12 2.5.13 2.5.14
`,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCatalog(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(out, tc.want) {
				t.Fatalf("got:\n%s\nwant (the end):\n%s", out, tc.want)
			}
		})
	}

	t.Run("json", func(t *testing.T) {
		out, err := runCatalog(t, "list", all, "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var s catalogSummary
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		if s.Kind != "directory" || len(s.Packages) != 4 || s.Packages[3] != (packageSummary{"sailoperator", "stable", 10, 32, "1.31.0-nightly-2026-08-22"}) ||
			!strings.HasPrefix(s.Digest, "sha256:") {
			t.Fatalf("%+v", s)
		}
		out, err = runCatalog(t, "list", all, "-o", "json", "--package", "cat-facts-operator")
		if err != nil {
			t.Fatal(err)
		}
		var d packageDetail
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		// cat-facts 1.1.1 skips 1.0.0 and 1.1.0 and replaces 1.1.0.
		e := d.Channels[0].Entries
		if len(d.Channels) != 1 || len(e) != 4 || e[2].Name != "cat-facts-operator.v1.1.1" || strings.Join(e[2].Skips, ",") != "cat-facts-operator.v1.0.0,cat-facts-operator.v1.1.0" ||
			strings.Join(d.Channels[0].Heads, ",") != "cat-facts-operator.v1.1.2" {
			t.Fatalf("%+v", d)
		}
	})

	t.Run("deprecations", func(t *testing.T) {
		dir := catalogDir(t, "kube-green")
		dep := `{"schema":"olm.deprecations","package":"kube-green","entries":[` +
			`{"reference":{"schema":"olm.package"},"message":"kube-green moves"},` +
			`{"reference":{"schema":"olm.channel","name":"alpha"},"message":"alpha\nis frozen"},` +
			`{"reference":{"schema":"olm.bundle","name":"kube-green.v0.5.0"},"message":"0.5.0 leaks memory"}]}`
		if err := os.WriteFile(filepath.Join(dir, "kube-green", "deprecations.json"), []byte(dep), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := runCatalog(t, "list", dir, "--package", "kube-green")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"alpha (deprecated)  kube-green.v0.7.1",
			"DEPRECATED   NAME               MESSAGE\n",
			"olm.package  <none>             kube-green moves\n",
			"olm.channel  alpha              alpha is frozen\n",
			"olm.bundle   kube-green.v0.5.0  0.5.0 leaks memory\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("no %q in:\n%s", want, out)
			}
		}
	})

	t.Run("a package the catalog lacks", func(t *testing.T) {
		_, err := runCatalog(t, "list", all, "--package", "etcd")
		if err == nil || !strings.Contains(err.Error(), `has no package "etcd"`) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestCatalogResolve(t *testing.T) {
	all := catalogDir(t, testcatalog.Packages...)
	type step struct{ from, to, edge string }
	cases := []struct {
		name    string
		args    []string
		bundle  string
		edge    string
		path    []step
		unreach []string
		err     string
	}{{
		name:   "a new install takes the highest version",
		args:   []string{"--package", "kube-green"},
		bundle: "kube-green.v0.7.1", edge: "InitialInstall",
	}, {
		name:   "a range",
		args:   []string{"--package", "kube-green", "--version", ">=0.4.0 <0.5.0"},
		bundle: "kube-green.v0.4.1", edge: "InitialInstall",
	}, {
		name:   "a channel",
		args:   []string{"--package", "infinispan", "--channel", "2.3.x"},
		bundle: "infinispan-operator.v2.3.8", edge: "InitialInstall",
	}, {
		name:   "kube-green from 0.3.0 to 0.7.1 along its replaces chain",
		args:   []string{"--package", "kube-green", "--installed-version", "0.3.0"},
		bundle: "kube-green.v0.3.1", edge: "Replaces",
		path: []step{
			{"0.3.0", "0.3.1", "Replaces"}, {"0.3.1", "0.4.0", "Replaces"}, {"0.4.0", "0.4.1", "Replaces"},
			{"0.4.1", "0.5.0", "Replaces"}, {"0.5.0", "0.5.1", "Replaces"}, {"0.5.1", "0.5.2", "Replaces"},
			{"0.5.2", "0.6.0", "Replaces"}, {"0.6.0", "0.7.0", "Replaces"}, {"0.7.0", "0.7.1", "Replaces"},
		},
	}, {
		name:   "the path stops at the range",
		args:   []string{"--package", "kube-green", "--installed-bundle", "kube-green.v0.3.0", "--version", "<0.5.0"},
		bundle: "kube-green.v0.3.1", edge: "Replaces",
		path: []step{{"0.3.0", "0.3.1", "Replaces"}, {"0.3.1", "0.4.0", "Replaces"}, {"0.4.0", "0.4.1", "Replaces"}},
	}, {
		name:   "cat-facts skips 1.1.0",
		args:   []string{"--package", "cat-facts-operator", "--installed-version", "1.0.0"},
		bundle: "cat-facts-operator.v1.1.1", edge: "Skips",
		path: []step{{"1.0.0", "1.1.1", "Skips"}, {"1.1.1", "1.1.2", "Replaces"}},
	}, {
		name:   "infinispan's skipRange takes 2.4.18 to 2.5.14",
		args:   []string{"--package", "infinispan", "--channel", "stable", "--installed-version", "2.4.18"},
		bundle: "infinispan-operator.v2.5.14", edge: "SkipRange",
		path: []step{{"2.4.18", "2.5.14", "SkipRange"}},
	}, {
		name:   "infinispan from 2.3.0: versions the skip passes over are unreachable",
		args:   []string{"--package", "infinispan", "--channel", "2.3.x", "--installed-version", "2.3.0"},
		bundle: "infinispan-operator.v2.3.8", edge: "Skips",
		path:    []step{{"2.3.0", "2.3.8", "Skips"}},
		unreach: []string{"2.3.1", "2.3.2", "2.3.3", "2.3.4", "2.3.5", "2.3.6", "2.3.7"},
	}, {
		name:   "the installed version at the head stays",
		args:   []string{"--package", "kube-green", "--installed-version", "0.7.1"},
		bundle: "kube-green.v0.7.1", edge: "Installed",
	}, {
		name:   "SelfCertified jumps",
		args:   []string{"--package", "kube-green", "--installed-version", "0.3.0", "--policy", "SelfCertified", "--version", "<0.6.0"},
		bundle: "kube-green.v0.5.2", edge: "SelfCertified",
		path: []step{{"0.3.0", "0.5.2", "SelfCertified"}},
	}, {
		name: "nothing in range: the resolver's message with the catalog's counts",
		args: []string{"--package", "kube-green", "--version", ">=1.0.0"},
		err:  `no bundle of package "kube-green" for version range ">=1.0.0" in any channel (catalog "` + all + `": 10 bundles, 0 in channels and range)`,
	}, {
		name: "no successor in the channel",
		args: []string{"--package", "infinispan", "--channel", "2.2.x", "--installed-version", "2.3.0"},
		err:  `(catalog "` + all + `": 49 bundles, 6 in channels and range, 0 of them successors of installed bundle "infinispan-operator.v2.3.0")`,
	}, {
		name: "an unknown package",
		args: []string{"--package", "etcd"},
		err:  `no bundle of package "etcd" for any version in any channel (catalog "` + all + `": no package "etcd")`,
	}, {
		name: "an installed version no bundle has",
		args: []string{"--package", "kube-green", "--installed-version", "0.9.9"},
		err:  `no bundle of package "kube-green" has version 0.9.9 in any catalog: pass --installed-bundle too`,
	}, {
		name: "an installed bundle not in the catalog",
		args: []string{"--package", "kube-green", "--installed-bundle", "kube-green.v9"},
		err:  `installed bundle "kube-green.v9" is not a bundle of package "kube-green" in any catalog: pass --installed-version too`,
	}, {
		name: "a bad range",
		args: []string{"--package", "kube-green", "--version", ">>1"},
		err:  "version: not a version range",
	}, {
		name: "a bad policy",
		args: []string{"--package", "kube-green", "--policy", "Whatever"},
		err:  `upgradeConstraintPolicy: "Whatever" is neither CatalogProvided nor SelfCertified`,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCatalog(t, append([]string{"resolve", all, "-o", "json"}, tc.args...)...)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var r resolveOutput
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			if r.Resolved.Bundle != tc.bundle || string(r.Resolved.Edge) != tc.edge || r.Resolved.Catalog != all || r.Resolved.Image == "" {
				t.Fatalf("resolved %+v, want %s by %s", r.Resolved, tc.bundle, tc.edge)
			}
			var path []step
			for _, s := range r.UpgradePath {
				path = append(path, step{s.FromVersion, s.ToVersion, string(s.Edge)})
			}
			if !slices.Equal(path, tc.path) || r.PathEnd != "" {
				t.Fatalf("path %v (end %q), want %v", path, r.PathEnd, tc.path)
			}
			if strings.Join(r.Resolved.Unreachable, " ") != strings.Join(tc.unreach, " ") {
				t.Fatalf("unreachable %v, want %v", r.Resolved.Unreachable, tc.unreach)
			}
		})
	}

	t.Run("table", func(t *testing.T) {
		out, err := runCatalog(t, "resolve", all, "--package", "cat-facts-operator", "--installed-version", "1.0.0")
		if err != nil {
			t.Fatal(err)
		}
		want := `Package:      cat-facts-operator
Installed:    cat-facts-operator.v1.0.0 (1.0.0)
Policy:       CatalogProvided
Catalog:      ` + all + `
Bundle:       cat-facts-operator.v1.1.1
Version:      1.1.1
Image:        quay.io/community-operator-pipeline-prod/cat-facts-operator:1.1.1
Channels:     stable
Edge:         Skips
Unreachable:  <none>

Upgrade path from 1.0.0 (2 steps):
STEP  FROM   TO     BUNDLE                     EDGE      CATALOG
1     1.0.0  1.1.1  cat-facts-operator.v1.1.1  Skips     ` + all + `
2     1.1.1  1.1.2  cat-facts-operator.v1.1.2  Replaces  ` + all + `
`
		if out != want {
			t.Fatalf("got:\n%s\nwant:\n%s", out, want)
		}
	})

	t.Run("several directories of the same priority are ambiguous", func(t *testing.T) {
		other := catalogDir(t, "kube-green")
		_, err := runCatalog(t, "resolve", all, other, "--package", "kube-green")
		if err == nil || !strings.Contains(err.Error(), `package "kube-green" has bundles for any version in any channel in catalogs of the same priority`) {
			t.Fatalf("got %v", err)
		}
		// A package only one of them has is not.
		out, err := runCatalog(t, "resolve", all, other, "--package", "infinispan", "-o", "json")
		if err != nil || !strings.Contains(out, `"bundle": "infinispan-operator.v2.5.14"`) {
			t.Fatalf("got %v:\n%s", err, out)
		}
		if _, err := runCatalog(t, "resolve", all, all, "--package", "kube-green"); err == nil || !strings.Contains(err.Error(), "is given twice") {
			t.Fatalf("got %v", err)
		}
	})
}

// TestCatalogHostile feeds invalid and oversized catalogs: fbc's errors,
// naming file and blob, and the limits bound them.
func TestCatalogHostile(t *testing.T) {
	write := func(t *testing.T, files map[string]string) string {
		dir := t.TempDir()
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	kg, err := os.ReadFile(filepath.Join(testcatalog.Dir(), "kube-green", "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		files map[string]string
		args  []string
		err   string
	}{{
		name: "an entry of no bundle",
		files: map[string]string{"c.json": `{"schema":"olm.package","name":"a","defaultChannel":"s"}
{"schema":"olm.bundle","name":"a.v1","package":"a","image":"x","properties":[{"type":"olm.package","value":{"packageName":"a","version":"1.0.0"}}]}
{"schema":"olm.channel","name":"s","package":"a","entries":[{"name":"a.v1"},{"name":"a.v2","replaces":"a.v1"}]}`},
		err: `c.json: blob 3 (olm.channel "s" of package "a"): entry "a.v2" is not an olm.bundle of package "a"`,
	}, {
		name:  "not JSON",
		files: map[string]string{"c.json": `{"schema": [`},
		err:   "c.json: blob 1",
	}, {
		name:  "no catalog at all",
		files: map[string]string{"README.md": "hello"},
		err:   "not a file-based catalog: no blobs",
	}, {
		name:  "a blob over --max-catalog-blob-bytes",
		files: map[string]string{"catalog.yaml": string(kg)},
		args:  []string{"--max-catalog-blob-bytes", "4096"},
		err:   "catalog.yaml: blob 1: is larger than 4096 bytes",
	}, {
		name:  "a catalog over --max-catalog-bytes",
		files: map[string]string{"catalog.yaml": string(kg)},
		args:  []string{"--max-catalog-bytes", "10000"},
		err:   "10000",
	}, {
		name:  "a deep blob",
		files: map[string]string{"c.json": strings.Repeat("[", 10000) + strings.Repeat("]", 10000)},
		err:   "c.json: blob 1",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := write(t, tc.files)
			for _, sub := range [][]string{{"list", dir}, {"resolve", dir, "--package", "a"}} {
				_, err := runCatalog(t, append(sub, tc.args...)...)
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "catalog "+dir+": ") {
					t.Fatalf("%s: got %v, want an error naming the catalog and with %q", sub[0], err, tc.err)
				}
			}
		})
	}
	t.Run("sources that are not catalogs", func(t *testing.T) {
		for _, tc := range []struct{ source, err string }{
			{filepath.Join(t.TempDir(), "missing"), "no such file or directory (a directory, image:REF or catalog/NAME)"},
			{"image:", "image: needs an image reference"},
			{"catalog/", "want catalog/NAME"},
			{"catalog/a/b", "want catalog/NAME"},
		} {
			if _, err := runCatalog(t, "list", tc.source); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: got %v, want %q", tc.source, err, tc.err)
			}
		}
		if _, err := runCatalog(t, "list", t.TempDir(), "-o", "yaml"); err == nil || err.Error() != `--output "yaml": want table or json` {
			t.Errorf("got %v", err)
		}
	})
}

// TestCatalogImage reads an FBC image as opm builds them (the catalog
// under /configs) from a real TLS registry trusted through --ca-file.
func TestCatalogImage(t *testing.T) {
	files := map[string]string{"root/README": "not part of the catalog"}
	for _, p := range []string{"kube-green", "cat-facts-operator"} {
		data, err := os.ReadFile(filepath.Join(testcatalog.Dir(), p, "catalog.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		files["configs/"+p+"/catalog.yaml"] = string(data)
	}
	reg := testregistry.New(t)
	ref := reg.MustPush(t, reg.Ref("catalog:latest"), testregistry.Image(t, testregistry.Layer(t, files)))
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, reg.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCatalog(t, "list", "image:"+ref, "--ca-file", ca)
	if err != nil {
		t.Fatal(err)
	}
	want := `PACKAGE             DEFAULT CHANNEL  CHANNELS  BUNDLES  LATEST
cat-facts-operator  stable           1         4        1.1.2
kube-green          alpha            1         10       0.7.1
`
	if out != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out, want)
	}
	out, err = runCatalog(t, "resolve", "image:"+ref, "--ca-file", ca, "--package", "kube-green", "--installed-version", "0.6.0", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var r resolveOutput
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Resolved.Catalog != ref || len(r.UpgradePath) != 2 || r.UpgradePath[1].To != "kube-green.v0.7.1" {
		t.Fatalf("%+v", r)
	}
	if _, err := runCatalog(t, "list", "image:"+ref); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without --ca-file: got %v, want a certificate error", err)
	}
	if _, err := runCatalog(t, "list", "image:"+ref, "--ca-file", ca, "--max-bundle-bytes", "1000"); err == nil || !strings.Contains(err.Error(), "1000") {
		t.Fatalf("with --max-bundle-bytes 1000: got %v, want the unpack limit", err)
	}
}

// TestUpgradePathBound walks a replaces chain longer than maxUpgradeSteps:
// the path stops at the bound and says so.
func TestUpgradePathBound(t *testing.T) {
	const n = maxUpgradeSteps + 5
	c := resolve.Content{Packages: []resolve.Package{{Name: "p"}}}
	ch := resolve.Channel{Package: "p", Name: "stable"}
	for i := range n {
		name := fmt.Sprintf("p.v1.0.%d", i)
		e := resolve.ChannelEntry{Name: name}
		if i > 0 {
			e.Replaces = fmt.Sprintf("p.v1.0.%d", i-1)
		}
		ch.Entries = append(ch.Entries, e)
		c.Bundles = append(c.Bundles, resolve.Bundle{Package: "p", Name: name, Image: "example.com/p:" + name, Properties: []resolve.Property{
			{Type: "olm.package", Value: fmt.Appendf(nil, `{"packageName":"p","version":"1.0.%d"}`, i)},
		}})
	}
	c.Channels = []resolve.Channel{ch}
	idx, err := resolve.NewIndex(c)
	if err != nil {
		t.Fatal(err)
	}
	cats := []resolve.Catalog{{Name: "long", Index: idx}}
	r, err := upgradePath(resolve.Request{PackageName: "p", Installed: &resolve.Installed{Name: "p.v1.0.0", Version: "1.0.0"}}, cats)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.UpgradePath) != maxUpgradeSteps || r.PathEnd != fmt.Sprintf("stopped after %d steps", maxUpgradeSteps) ||
		r.UpgradePath[maxUpgradeSteps-1].To != fmt.Sprintf("p.v1.0.%d", maxUpgradeSteps) {
		t.Fatalf("%d steps, end %q", len(r.UpgradePath), r.PathEnd)
	}
	// Four steps short of the end, the path reaches the head.
	r, err = upgradePath(resolve.Request{PackageName: "p", Installed: &resolve.Installed{Name: "p.v1.0.4", Version: "1.0.4"}}, cats)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.UpgradePath) != maxUpgradeSteps || r.PathEnd != "" {
		t.Fatalf("%d steps, end %q", len(r.UpgradePath), r.PathEnd)
	}
}
