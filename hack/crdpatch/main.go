// Command crdpatch adds to the CRDs controller-gen writes what its markers
// cannot express, so that the API server itself refuses what RukPak v0.16's
// CRDs refused, in the API server's own words:
//
//   - maxLength on metadata.name ("Too long: may not be more than 52
//     bytes"): a Bundle's name is at most 52 characters, a
//     BundleDeployment's at most 45 (its Bundles' names are its name plus
//     7 characters);
//   - oneOf over the members of every Bundle source and of every git ref
//     ("must validate one and only one schema (oneOf)").
//
// make generate runs it after controller-gen on each CRD file:
//
//	go run ./hack/crdpatch manifests/base/crd/core.rukpak.io_bundles.yaml ...
//
// It is idempotent: a patched file patched again is unchanged. A CRD of a
// kind it has no rules for is left alone. Rules name their schemas by path,
// and a path that does not exist, or a source whose type enum and member
// table disagree, is an error: the tables below must follow the API types.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// sourceMembers are the members of a Bundle source, one per source type
// (each is named as its type). A new source type adds its member here.
// The order is RukPak's: with no member set, the API server also reports
// the first alternative's failure ("spec.source.git: Required value").
var sourceMembers = []string{"git", "image", "configMaps", "upload", "http", "catalog"}

// gitRefMembers are the members of a git ref, in RukPak's order.
var gitRefMembers = []string{"branch", "commit", "tag"}

// rule is what one kind's CRD gets.
type rule struct {
	// maxNameLength bounds metadata.name; 0 leaves it unbounded.
	maxNameLength int
	// sources are the dot-separated property paths, from the root of the
	// schema, of the kind's Bundle sources.
	sources []string
}

// rules by the CRD's spec.names.kind.
var rules = map[string]rule{
	"Bundle":           {maxNameLength: 52, sources: []string{"spec.source", "status.resolvedSource"}},
	"BundleDeployment": {maxNameLength: 45, sources: []string{"spec.template.spec.source"}},
	"Catalog":          {sources: []string{"spec.source", "status.resolvedSource"}},
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crdpatch CRD.yaml...")
		os.Exit(2)
	}
	for _, path := range os.Args[1:] {
		if err := patchFile(path); err != nil {
			fmt.Fprintf(os.Stderr, "crdpatch: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}

// patchFile patches the CRD in path in place, writing only when it changed.
func patchFile(path string) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := Patch(in)
	if err != nil {
		return err
	}
	if bytes.Equal(in, out) {
		return nil
	}
	return os.WriteFile(path, out, 0o644) //nolint:gosec // a generated manifest, readable by all as before
}

// docStart is how controller-gen begins each file.
const docStart = "---\n"

// Patch returns the CRD document in, patched by its kind's rule, formatted
// as controller-gen formats it (keys sorted, the same line wrapping).
func Patch(in []byte) ([]byte, error) {
	body := bytes.TrimPrefix(in, []byte(docStart))
	if bytes.Contains(body, []byte("\n---")) {
		return nil, errors.New("more than one YAML document: one CRD per file")
	}
	var crd map[string]any
	if err := yaml.Unmarshal(body, &crd); err != nil {
		return nil, err
	}
	if crd["kind"] != "CustomResourceDefinition" {
		return nil, fmt.Errorf("kind %v, not CustomResourceDefinition", crd["kind"])
	}
	kind, _ := lookup(crd, "spec", "names", "kind").(string)
	r, ok := rules[kind]
	if !ok {
		return in, nil
	}
	versions, _ := lookup(crd, "spec", "versions").([]any)
	if len(versions) == 0 {
		return nil, errors.New("no spec.versions")
	}
	for _, v := range versions {
		version, _ := v.(map[string]any)
		root, ok := lookup(version, "schema", "openAPIV3Schema").(map[string]any)
		if !ok {
			return nil, fmt.Errorf("version %v has no openAPIV3Schema", version["name"])
		}
		if err := r.apply(root); err != nil {
			return nil, fmt.Errorf("%s version %v: %w", kind, version["name"], err)
		}
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return nil, err
	}
	if bytes.HasPrefix(in, []byte(docStart)) {
		out = append([]byte(docStart), out...)
	}
	return out, nil
}

// apply patches one version's schema.
func (r rule) apply(root map[string]any) error {
	if r.maxNameLength > 0 {
		meta, err := schemaAt(root, "metadata")
		if err != nil {
			return err
		}
		props, _ := meta["properties"].(map[string]any)
		if props == nil {
			props = map[string]any{}
			meta["properties"] = props
		}
		// The only restriction of metadata a CRD may make besides
		// generateName's.
		props["name"] = map[string]any{"type": "string", "maxLength": r.maxNameLength}
	}
	for _, p := range r.sources {
		src, err := schemaAt(root, p)
		if err != nil {
			return err
		}
		if err := checkTypeEnum(p, src); err != nil {
			return err
		}
		if err := setOneOf(p, src, sourceMembers); err != nil {
			return err
		}
		ref, err := schemaAt(src, "git.ref")
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if err := setOneOf(p+".git.ref", ref, gitRefMembers); err != nil {
			return err
		}
	}
	return nil
}

// schemaAt follows a dot-separated property path from s.
func schemaAt(s map[string]any, path string) (map[string]any, error) {
	for _, name := range strings.Split(path, ".") {
		next, ok := lookup(s, "properties", name).(map[string]any)
		if !ok {
			return nil, fmt.Errorf("no schema at %s", path)
		}
		s = next
	}
	return s, nil
}

// setOneOf makes s require exactly one of members, each of which must be
// one of its properties.
func setOneOf(path string, s map[string]any, members []string) error {
	oneOf := make([]any, 0, len(members))
	for _, m := range members {
		if lookup(s, "properties", m) == nil {
			return fmt.Errorf("%s has no member %q", path, m)
		}
		oneOf = append(oneOf, map[string]any{"required": []any{m}})
	}
	s["oneOf"] = oneOf
	return nil
}

// checkTypeEnum fails when the source's type enum and sourceMembers name
// different source types: a type without a member in oneOf would always be
// refused, a member without its type never reached.
func checkTypeEnum(path string, src map[string]any) error {
	enum, _ := lookup(src, "properties", "type", "enum").([]any)
	types := make([]string, 0, len(enum))
	for _, e := range enum {
		s, _ := e.(string)
		types = append(types, s)
	}
	want := slices.Clone(sourceMembers)
	slices.Sort(types)
	slices.Sort(want)
	if !slices.Equal(types, want) {
		return fmt.Errorf("%s.type enum is %v but crdpatch's sourceMembers are %v: update sourceMembers", path, types, want)
	}
	return nil
}

// lookup returns the value at keys in nested maps, or nil.
func lookup(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}
