package shard

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

func TestParse(t *testing.T) {
	for _, s := range []string{"", "  "} {
		sh, err := Parse(s)
		if err != nil || sh != nil {
			t.Errorf("Parse(%q) = %v, %v; want no sharding", s, sh, err)
		}
		if sh.String() != "" || sh.Keys() != nil || sh.ByObject() != nil || !sh.Owns(map[string]string{Label: "x"}) {
			t.Errorf("no sharding must own everything and restrict nothing")
		}
	}
	for _, tc := range []struct{ in, err string }{
		{"core.rukpak.io/shard in (shard1", "label selector \"core.rukpak.io/shard in (shard1\": "},
		{"-bad-key=x", "label selector \"-bad-key=x\": "},
		{Label + "=" + strings.Repeat("v", 64), "must be no more than 63 bytes"},
		{Label + " in (a b)", "label selector"},
	} {
		if _, err := Parse(tc.in); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Parse(%q) error %v, want one containing %q", tc.in, err, tc.err)
		}
	}
	sh, err := Parse("team=a, " + Label + " in (shard2, shard1), !" + Label + "-x")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{Label, Label + "-x", "team"}; !slices.Equal(sh.Keys(), want) {
		t.Errorf("Keys() = %v, want %v", sh.Keys(), want)
	}
	if got := sh.String(); got != "core.rukpak.io/shard in (shard1,shard2),!core.rukpak.io/shard-x,team=a" {
		t.Errorf("String() = %q", got)
	}
}

// TestStamp: a generated Bundle matches a selector exactly when its
// BundleDeployment does, whatever the template's labels say.
func TestStamp(t *testing.T) {
	sh, err := Parse(Label + " in (shard1), team")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name           string
		bd, tmpl, want map[string]string
	}{
		{"copied", map[string]string{Label: "shard1", "team": "a", "app": "x"}, map[string]string{"app": "y"},
			map[string]string{Label: "shard1", "team": "a", "app": "y"}},
		{"the template's value overwritten", map[string]string{Label: "shard1", "team": "a"}, map[string]string{Label: "shard2", "team": "b"},
			map[string]string{Label: "shard1", "team": "a"}},
		{"the template's value removed", nil, map[string]string{Label: "shard1", "team": "a", "app": "y"},
			map[string]string{"app": "y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			into := maps.Clone(tc.tmpl)
			if !sh.Differs(tc.bd, into) {
				t.Error("Differs() = false before Stamp")
			}
			sh.Stamp(tc.bd, into)
			if !maps.Equal(into, tc.want) {
				t.Errorf("Stamp() = %v, want %v", into, tc.want)
			}
			if sh.Differs(tc.bd, into) {
				t.Error("Differs() = true after Stamp")
			}
			if sh.Owns(tc.bd) != sh.Owns(into) {
				t.Errorf("Owns(bd) = %v, Owns(bundle) = %v", sh.Owns(tc.bd), sh.Owns(into))
			}
		})
	}
	var none *Shard
	into := map[string]string{Label: "shard2"}
	none.Stamp(map[string]string{Label: "shard1"}, into)
	if into[Label] != "shard2" || none.Differs(map[string]string{Label: "shard1"}, into) {
		t.Error("no sharding must leave labels alone")
	}
}

func TestByObject(t *testing.T) {
	sh, err := Parse("!" + Label)
	if err != nil {
		t.Fatal(err)
	}
	by := sh.ByObject()
	if len(by) != 2 {
		t.Fatalf("ByObject() has %d entries, want Bundle and BundleDeployment", len(by))
	}
	for obj, c := range by {
		switch obj.(type) {
		case *rukpakv1alpha1.Bundle, *rukpakv1alpha1.BundleDeployment:
		default:
			t.Errorf("unexpected %T", obj)
		}
		if c.Label == nil || c.Label.Matches(labels.Set{Label: "shard1"}) || !c.Label.Matches(labels.Set{}) {
			t.Errorf("%T: selector %v", obj, c.Label)
		}
	}
}

func TestUnserved(t *testing.T) {
	main, err := Parse("!" + Label)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := main.Unserved([]string{"shard1", "shard2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		labels map[string]string
		want   bool
	}{
		{nil, false},                           // the main instance's own
		{map[string]string{"app": "x"}, false}, // the main instance's own
		{map[string]string{Label: "shard1"}, false},
		{map[string]string{Label: "shard2"}, false},
		{map[string]string{Label: "shard3"}, true},
		{map[string]string{Label: ""}, true},
		{map[string]string{Label: "Shard1"}, true},
	} {
		if got := sel.Matches(labels.Set(tc.labels)); got != tc.want {
			t.Errorf("%v selected: %v, want %v", tc.labels, got, tc.want)
		}
		// Disjoint from the main instance's own objects.
		if sel.Matches(labels.Set(tc.labels)) && main.Owns(tc.labels) {
			t.Errorf("%v is both the main instance's and unserved", tc.labels)
		}
	}

	for _, tc := range []struct {
		selector string
		known    []string
		err      string
	}{
		{"", []string{"shard1"}, "only the main instance (label selector !core.rukpak.io/shard) reports objects of unknown shards, not one selecting \"\""},
		{Label + " in (shard1)", []string{"shard2"}, "not one selecting \"core.rukpak.io/shard in (shard1)\""},
		{"!" + Label + ",team=a", []string{"shard1"}, "not one selecting"},
		{"!" + Label, nil, "no known shards"},
		{"!" + Label, []string{"shard1", ""}, "an empty shard name"},
		{"!" + Label, []string{"a b"}, `shard "a b" is not a label value`},
	} {
		sh, err := Parse(tc.selector)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sh.Unserved(tc.known); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q.Unserved(%q) error %v, want one containing %q", tc.selector, tc.known, err, tc.err)
		}
	}
}
