package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// The repository's CRDs, as make generate leaves them.
var crdFiles = []string{
	"../../manifests/base/crd/core.rukpak.io_bundles.yaml",
	"../../manifests/base/crd/core.rukpak.io_bundledeployments.yaml",
}

// TestCommittedCRDsArePatched: the committed CRDs carry the patch, and
// patching them again changes no byte (make generate is idempotent).
func TestCommittedCRDsArePatched(t *testing.T) {
	for _, f := range crdFiles {
		in, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out, err := Patch(in)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !bytes.Equal(in, out) {
			t.Errorf("%s: patching again changed it; run make generate", filepath.Base(f))
		}
	}
}

// unpatched is a committed CRD with everything crdpatch adds taken out, as
// controller-gen writes it.
func unpatched(t *testing.T, f string) []byte {
	t.Helper()
	in, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(in, &crd); err != nil {
		t.Fatal(err)
	}
	var strip func(v any)
	strip = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			delete(v, "oneOf")
			for _, c := range v {
				strip(c)
			}
		case []any:
			for _, c := range v {
				strip(c)
			}
		}
	}
	strip(crd)
	for _, v := range crd["spec"].(map[string]any)["versions"].([]any) {
		meta := lookup(v.(map[string]any), "schema", "openAPIV3Schema", "properties", "metadata").(map[string]any)
		delete(meta, "properties")
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(docStart), out...)
}

func TestPatch(t *testing.T) {
	cases := []struct {
		file    string
		maxName float64
		sources []string
	}{
		{crdFiles[0], 52, []string{"spec.source", "status.resolvedSource"}},
		{crdFiles[1], 45, []string{"spec.template.spec.source"}},
	}
	for _, tc := range cases {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			in := unpatched(t, tc.file)
			if bytes.Contains(in, []byte("oneOf")) || bytes.Contains(in, []byte("maxLength: 52")) {
				t.Fatal("the unpatched input still has what the patch adds")
			}
			out, err := Patch(in)
			if err != nil {
				t.Fatal(err)
			}
			var crd map[string]any
			if err := yaml.Unmarshal(out, &crd); err != nil {
				t.Fatal(err)
			}
			root := lookup(crd["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any), "schema", "openAPIV3Schema").(map[string]any)
			if got := lookup(root, "properties", "metadata", "properties", "name", "maxLength"); got != tc.maxName {
				t.Errorf("metadata.name maxLength = %v, want %v", got, tc.maxName)
			}
			for _, p := range tc.sources {
				src, err := schemaAt(root, p)
				if err != nil {
					t.Fatal(err)
				}
				if got := requiredOf(src["oneOf"]); got != "git|image|configMaps|upload|http|catalog" {
					t.Errorf("%s oneOf = %s", p, got)
				}
				ref, err := schemaAt(src, "git.ref")
				if err != nil {
					t.Fatal(err)
				}
				if got := requiredOf(ref["oneOf"]); got != "branch|commit|tag" {
					t.Errorf("%s.git.ref oneOf = %s", p, got)
				}
			}
			// Idempotent, and byte for byte what is committed: nothing but
			// the patch differs from controller-gen's formatting.
			again, err := Patch(out)
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("second patch changed the output (err %v)", err)
			}
			committed, _ := os.ReadFile(tc.file)
			if !bytes.Equal(out, committed) {
				t.Errorf("patched output differs from the committed CRD")
			}
		})
	}
}

func requiredOf(oneOf any) string {
	var names []string
	list, _ := oneOf.([]any)
	for _, alt := range list {
		req, _ := alt.(map[string]any)["required"].([]any)
		for _, r := range req {
			names = append(names, r.(string))
		}
	}
	return strings.Join(names, "|")
}

// mutated is the unpatched Bundle CRD with change applied to its schema.
func mutated(t *testing.T, change func(root map[string]any)) string {
	t.Helper()
	var crd map[string]any
	if err := yaml.Unmarshal(unpatched(t, crdFiles[0]), &crd); err != nil {
		t.Fatal(err)
	}
	change(lookup(crd["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any), "schema", "openAPIV3Schema").(map[string]any))
	out, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestPatchRefuses(t *testing.T) {
	bundles := string(unpatched(t, crdFiles[0]))
	props := func(s map[string]any, path string) map[string]any {
		s, err := schemaAt(s, path)
		if err != nil {
			t.Fatal(err)
		}
		return s["properties"].(map[string]any)
	}
	cases := []struct {
		name, in, want string
	}{
		{"not a CRD", "kind: ConfigMap\n", "kind ConfigMap, not CustomResourceDefinition"},
		{"two documents", bundles + "---\n" + bundles, "more than one YAML document"},
		{
			"a source type with no member in the table",
			mutated(t, func(root map[string]any) {
				typ := props(root, "spec.source")["type"].(map[string]any)
				typ["enum"] = append(typ["enum"].([]any), "oci")
			}),
			"spec.source.type enum is [catalog configMaps git http image oci upload] but crdpatch's sourceMembers are [catalog configMaps git http image upload]",
		},
		{
			"a path that is gone",
			mutated(t, func(root map[string]any) { delete(props(root, "status"), "resolvedSource") }),
			"no schema at status.resolvedSource",
		},
		{
			"a member that is gone",
			mutated(t, func(root map[string]any) { delete(props(root, "spec.source.git.ref"), "tag") }),
			`spec.source.git.ref has no member "tag"`,
		},
		{
			"a source member that is gone",
			mutated(t, func(root map[string]any) { delete(props(root, "status.resolvedSource"), "http") }),
			`status.resolvedSource has no member "http"`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Patch([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// A CRD of a kind without rules (another project's, or one not yet
// listed) is left byte for byte as it is.
func TestPatchLeavesOtherKinds(t *testing.T) {
	in := []byte(strings.Replace(string(unpatched(t, crdFiles[0])), "kind: Bundle\n", "kind: Other\n", 1))
	out, err := Patch(in)
	if err != nil || !bytes.Equal(in, out) {
		t.Fatalf("changed a CRD without rules (err %v)", err)
	}
}

// patchFile writes only a changed file (make generate must not touch the
// mtime of an up-to-date one) and writes the patch when it is missing.
func TestPatchFile(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "crd.yaml")
	if err := os.WriteFile(f, unpatched(t, crdFiles[1]), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := patchFile(f); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(f)
	want, _ := os.ReadFile(crdFiles[1])
	if !bytes.Equal(got, want) {
		t.Fatal("patched file differs from the committed CRD")
	}
	old := time.Unix(1_000_000_000, 0)
	if err := os.Chtimes(f, old, old); err != nil {
		t.Fatal(err)
	}
	if err := patchFile(f); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(f); err != nil || !st.ModTime().Equal(old) {
		t.Fatalf("an up-to-date file was written again (%v)", err)
	}
}
