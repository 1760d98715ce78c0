// Package shard splits Bundles and BundleDeployments among several
// provisioner processes by a label selector (as Flux's
// --watch-label-selector): each process caches, and so reconciles, only the
// objects its selector matches, and the Bundles a BundleDeployment generates
// carry the BundleDeployment's values of the selector's label keys, so they
// land on the same process.
package shard

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// Label is the label key the shipped sharding overlay (manifests/overlays/
// sharding) selects on: a BundleDeployment labelled core.rukpak.io/shard=
// shard1 is reconciled by the shard1 instance, one without the label by the
// main instance (selector !core.rukpak.io/shard).
const Label = "core.rukpak.io/shard"

// Shard is the part of the cluster's Bundles and BundleDeployments one
// process reconciles. A nil *Shard is the whole cluster.
type Shard struct {
	selector labels.Selector
	// keys are the label keys selector looks at, sorted: the labels a
	// generated Bundle takes from its BundleDeployment.
	keys []string
}

// Parse reads a label selector in kubectl's syntax (for example
// "core.rukpak.io/shard in (shard1)" or "!core.rukpak.io/shard"); an empty
// one means no sharding (nil). Keys and values are checked as the API
// server checks labels.
func Parse(s string) (*Shard, error) {
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("label selector %q: %w", s, err)
	}
	reqs, selectable := sel.Requirements()
	if !selectable {
		// labels.Parse never returns a selector that selects nothing; the
		// check keeps a future one from silently starving this process.
		return nil, fmt.Errorf("label selector %q selects nothing", s)
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	var keys []string
	for _, r := range reqs {
		if !slices.Contains(keys, r.Key()) {
			keys = append(keys, r.Key())
		}
	}
	slices.Sort(keys)
	return &Shard{selector: sel, keys: keys}, nil
}

// String is the selector in canonical form ("" for no sharding).
func (s *Shard) String() string {
	if s == nil {
		return ""
	}
	return s.selector.String()
}

// Keys are the label keys the selector looks at.
func (s *Shard) Keys() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.keys)
}

// Owns reports whether an object with these labels is this shard's.
func (s *Shard) Owns(l map[string]string) bool {
	return s == nil || s.selector.Matches(labels.Set(l))
}

// ByObject restricts a manager's cache of Bundles and BundleDeployments to
// this shard's (nil for no sharding): objects of other shards are neither
// held in memory nor reconciled.
func (s *Shard) ByObject() map[client.Object]cache.ByObject {
	if s == nil {
		return nil
	}
	return map[client.Object]cache.ByObject{
		&rukpakv1alpha1.Bundle{}:           {Label: s.selector},
		&rukpakv1alpha1.BundleDeployment{}: {Label: s.selector},
	}
}

// Stamp gives a Bundle's labels (into) the BundleDeployment's (from) values
// of the selector's keys, and removes those the BundleDeployment lacks, so
// the Bundle matches every selector on these keys exactly when its
// BundleDeployment does. A value the template's metadata set for one of
// these keys is overwritten: a template does not choose its Bundle's shard.
func (s *Shard) Stamp(from, into map[string]string) {
	if s == nil {
		return
	}
	for _, k := range s.keys {
		if v, ok := from[k]; ok {
			into[k] = v
		} else {
			delete(into, k)
		}
	}
}

// Differs reports whether Stamp would change into.
func (s *Shard) Differs(from, into map[string]string) bool {
	if s == nil {
		return false
	}
	for _, k := range s.keys {
		v, ok := from[k]
		w, has := into[k]
		if ok != has || v != w {
			return true
		}
	}
	return false
}

// Unserved selects the objects labelled for a shard not in known: Label
// set, to a value none of known. Only the main instance (selector !Label)
// may report them: its own objects and these are disjoint, and with the
// known shards' (Label in (known...)) they are every object.
func (s *Shard) Unserved(known []string) (labels.Selector, error) {
	if s == nil || s.selector.String() != "!"+Label {
		return nil, fmt.Errorf("only the main instance (label selector !%s) reports objects of unknown shards, not one selecting %q", Label, s.String())
	}
	if len(known) == 0 {
		return nil, errors.New("no known shards")
	}
	for _, v := range known {
		if v == "" {
			return nil, errors.New("an empty shard name")
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("shard %q is not a label value: %s", v, strings.Join(errs, "; "))
		}
	}
	has, err := labels.NewRequirement(Label, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	notKnown, err := labels.NewRequirement(Label, selection.NotIn, known)
	if err != nil {
		return nil, err
	}
	return labels.NewSelector().Add(*has, *notKnown), nil
}
