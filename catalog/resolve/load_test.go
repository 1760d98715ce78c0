package resolve

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// The four real packages of the community catalog (read-only testdata).
var realPackages = []string{"cat-facts-operator", "infinispan", "kube-green", "sailoperator"}

// testdataDir is shared/testdata/catalogs beside the repository.
func testdataDir() string { return testenv.SharedTestdata("catalogs") }

type fbcBlob struct {
	Schema         string `yaml:"schema"`
	Name           string `yaml:"name"`
	Package        string `yaml:"package"`
	Image          string `yaml:"image"`
	DefaultChannel string `yaml:"defaultChannel"`
	Entries        []struct {
		Name      string   `yaml:"name"`
		Replaces  string   `yaml:"replaces"`
		Skips     []string `yaml:"skips"`
		SkipRange string   `yaml:"skipRange"`
		Reference struct {
			Schema string `yaml:"schema"`
			Name   string `yaml:"name"`
		} `yaml:"reference"`
		Message string `yaml:"message"`
	} `yaml:"entries"`
	Properties []struct {
		Type  string `yaml:"type"`
		Value any    `yaml:"value"`
	} `yaml:"properties"`
}

// decodeFBC is a test-only reader of a YAML FBC file into Content; the
// production parser lives elsewhere and is not a dependency of this package.
func decodeFBC(r io.Reader) (Content, error) {
	var c Content
	dec := yaml.NewDecoder(r)
	for {
		var b fbcBlob
		if err := dec.Decode(&b); errors.Is(err, io.EOF) {
			return c, nil
		} else if err != nil {
			return c, err
		}
		switch b.Schema {
		case "olm.package":
			c.Packages = append(c.Packages, Package{Name: b.Name, DefaultChannel: b.DefaultChannel})
		case "olm.channel":
			ch := Channel{Package: b.Package, Name: b.Name}
			for _, e := range b.Entries {
				ch.Entries = append(ch.Entries, ChannelEntry{Name: e.Name, Replaces: e.Replaces, Skips: e.Skips, SkipRange: e.SkipRange})
			}
			c.Channels = append(c.Channels, ch)
		case "olm.bundle":
			bu := Bundle{Package: b.Package, Name: b.Name, Image: b.Image}
			for _, p := range b.Properties {
				v, err := json.Marshal(p.Value)
				if err != nil {
					return c, err
				}
				bu.Properties = append(bu.Properties, Property{Type: p.Type, Value: v})
			}
			c.Bundles = append(c.Bundles, bu)
		case "olm.deprecations":
			d := Deprecations{Package: b.Package}
			for _, e := range b.Entries {
				d.Entries = append(d.Entries, DeprecationEntry{Schema: e.Reference.Schema, Name: e.Reference.Name, Message: e.Message})
			}
			c.Deprecations = append(c.Deprecations, d)
		}
	}
}

var (
	realOnce    sync.Once
	realContent map[string]Content
	realErr     error
)

// realCatalogs returns each real package's content, read once per test binary.
func realCatalogs(t testing.TB) map[string]Content {
	t.Helper()
	realOnce.Do(func() {
		realContent = map[string]Content{}
		for _, p := range realPackages {
			f, err := os.Open(filepath.Join(testdataDir(), p, "catalog.yaml"))
			if err != nil {
				realErr = err
				return
			}
			c, err := decodeFBC(f)
			f.Close()
			if err != nil {
				realErr = err
				return
			}
			realContent[p] = c
		}
	})
	if realErr != nil {
		t.Fatal(realErr)
	}
	return realContent
}

// merge joins contents into one catalog.
func merge(cs ...Content) Content {
	var out Content
	for _, c := range cs {
		out.Packages = append(out.Packages, c.Packages...)
		out.Channels = append(out.Channels, c.Channels...)
		out.Bundles = append(out.Bundles, c.Bundles...)
		out.Deprecations = append(out.Deprecations, c.Deprecations...)
	}
	return out
}

// allReal is the four real packages as one catalog.
func allReal(t testing.TB) Content {
	rc := realCatalogs(t)
	var cs []Content
	for _, p := range realPackages {
		cs = append(cs, rc[p])
	}
	return merge(cs...)
}

// renamed copies c with every package name and bundle name prefixed by
// suffix, as a catalog of many distinct packages is built for benchmarks.
func renamed(c Content, suffix string) Content {
	rn := func(s string) string {
		if s == "" {
			return s
		}
		return s + suffix
	}
	var out Content
	for _, p := range c.Packages {
		out.Packages = append(out.Packages, Package{Name: rn(p.Name), DefaultChannel: p.DefaultChannel})
	}
	for _, ch := range c.Channels {
		nc := Channel{Package: rn(ch.Package), Name: ch.Name, Entries: make([]ChannelEntry, len(ch.Entries))}
		for i, e := range ch.Entries {
			skips := make([]string, len(e.Skips))
			for j, s := range e.Skips {
				skips[j] = rn(s)
			}
			nc.Entries[i] = ChannelEntry{Name: rn(e.Name), Replaces: rn(e.Replaces), Skips: skips, SkipRange: e.SkipRange}
		}
		out.Channels = append(out.Channels, nc)
	}
	for _, b := range c.Bundles {
		nb := Bundle{Package: rn(b.Package), Name: rn(b.Name), Image: b.Image}
		for _, p := range b.Properties {
			if p.Type == propertyPackage {
				var v map[string]any
				_ = json.Unmarshal(p.Value, &v)
				v["packageName"] = rn(v["packageName"].(string))
				p.Value, _ = json.Marshal(v)
			}
			nb.Properties = append(nb.Properties, p)
		}
		out.Bundles = append(out.Bundles, nb)
	}
	for _, d := range c.Deprecations {
		out.Deprecations = append(out.Deprecations, Deprecations{Package: rn(d.Package), Entries: d.Entries})
	}
	return out
}

// withDeprecations adds an olm.deprecations blob, as a catalog author would.
func withDeprecations(c Content, pkg string, entries ...DeprecationEntry) Content {
	c.Deprecations = append(append([]Deprecations(nil), c.Deprecations...), Deprecations{Package: pkg, Entries: entries})
	return c
}

func mustIndex(t testing.TB, c Content) *Index {
	t.Helper()
	idx, err := NewIndex(c)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func names(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
