package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// TestSchemaValidation proves that the CRD schema alone (no webhook) rejects
// structurally invalid objects with a message that names the problem.
func TestSchemaValidation(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()

	const validBundle = `
apiVersion: core.rukpak.io/v1alpha1
kind: Bundle
metadata: {name: combo-tag-ref}
spec:
  source:
    type: git
    git:
      ref: {tag: v0.0.2}
      repository: https://github.com/operator-framework/combo
  provisionerClassName: core-rukpak-io-plain
`
	const validBD = `
apiVersion: core.rukpak.io/v1alpha1
kind: BundleDeployment
metadata: {name: my-bundle-deployment}
spec:
  provisionerClassName: core-rukpak-io-plain
  template:
    metadata: {labels: {app: my-bundle}}
    spec:
      source: {type: image, image: {ref: "my-bundle@sha256:xyz123"}}
      provisionerClassName: core-rukpak-io-plain
`
	long := func(n int) string { return strings.Repeat("a", n) }

	tests := []struct {
		name    string
		base    string
		mutate  func(obj map[string]any)
		wantErr string // the API server's exact message after `is invalid: `; empty means accepted
	}{
		{name: "seed bundle is accepted", base: validBundle},
		{name: "seed bundle deployment is accepted", base: validBD},
		{
			name: "bundle name of 52 characters is accepted", base: validBundle,
			mutate: func(o map[string]any) { setName(o, long(52)) },
		},
		{
			// RukPak's e2e scenarios, with the API server's own words (the
			// CRD's maxLength and oneOf, as RukPak's CRDs had them).
			name: "bundle name over 52 characters (RukPak)", base: validBundle,
			mutate:  func(o map[string]any) { setName(o, "olm-crds-too-long-name-for-the-bundle-1234567890-1234567890") },
			wantErr: "[metadata.name: Too long: may not be more than 52 bytes, " + notChecked + "]",
		},
		{
			name: "bundle deployment name of 45 characters is accepted", base: validBD,
			mutate: func(o map[string]any) { setName(o, long(45)) },
		},
		{
			name: "bundle deployment name over 45 characters (RukPak)", base: validBD,
			mutate:  func(o map[string]any) { setName(o, "olm-crds-too-long-name-for-the-bundledeployment-1234567890") },
			wantErr: "[metadata.name: Too long: may not be more than 45 bytes, " + notChecked + "]",
		},
		{
			name: "two sources", base: validBundle,
			mutate: func(o map[string]any) {
				source(o)["image"] = map[string]any{"ref": "quay.io/x/y:v1"}
			},
			wantErr: oneOfTwo("spec.source"),
		},
		{
			// RukPak's "bundle with multiple sources": its type was no
			// type at all, which this CRD's enum refuses too, after.
			name: "two sources and an unknown type (RukPak)", base: validBundle,
			mutate: func(o map[string]any) {
				source(o)["type"] = "invalid source"
				source(o)["image"] = map[string]any{"ref": "localhost/testdata/bundles/plain-v0:valid"}
				source(o)["git"].(map[string]any)["ref"] = map[string]any{"commit": "9e3ab7f1a36302ef512294d5c9f2e9b9566b811e", "tag": "v0.0.1"}
			},
			wantErr: anyOrder(oneOfTwo("spec.source"), oneOfTwo("spec.source.git.ref"), `spec.source.type: Unsupported value: "invalid source": supported values: "image", "git", "configMaps", "http", "upload", "catalog"`, notChecked),
		},
		{
			name: "no members and an unknown type (RukPak)", base: validBundle,
			mutate: func(o map[string]any) {
				source(o)["type"] = "invalid source"
				delete(source(o), "git")
			},
			wantErr: anyOrder(oneOfNone("spec.source"), "spec.source.git: Required value", `spec.source.type: Unsupported value: "invalid source": supported values: "image", "git", "configMaps", "http", "upload", "catalog"`, notChecked),
		},
		{
			name: "no source at all", base: validBundle,
			mutate:  func(o map[string]any) { delete(spec(o), "source") },
			wantErr: "[spec.source: Required value, " + notChecked + "]",
		},
		{
			name: "source without a type", base: validBundle,
			mutate:  func(o map[string]any) { delete(source(o), "type") },
			wantErr: "[spec.source.type: Required value, " + notChecked + "]",
		},
		{
			name: "unknown source type", base: validBundle,
			mutate:  func(o map[string]any) { source(o)["type"] = "oci" },
			wantErr: `[spec.source.type: Unsupported value: "oci": supported values: "image", "git", "configMaps", "http", "upload", "catalog", ` + notChecked + "]",
		},
		{
			// One member, not the one type names: RukPak's webhook's words.
			name: "type whose member is missing", base: validBundle,
			mutate:  func(o map[string]any) { source(o)["type"] = "image" },
			wantErr: `spec.source: Invalid value: bundle.spec.source.image must be set for source type "image"`,
		},
		{
			// No member: RukPak's words (the oneOf, and the first
			// alternative's failure); the CEL rule is not reached.
			name: "type without any member", base: validBundle,
			mutate:  func(o map[string]any) { delete(source(o), "git") },
			wantErr: anyOrder(oneOfNone("spec.source"), "spec.source.git: Required value", notChecked),
		},
		{
			name: "configMaps type without configMaps", base: validBundle,
			mutate: func(o map[string]any) {
				source(o)["type"] = "configMaps"
			},
			wantErr: `spec.source: Invalid value: bundle.spec.source.configmaps must be set for source type "configmaps"`,
		},
		{
			name: "http type without http", base: validBundle,
			mutate: func(o map[string]any) {
				source(o)["type"] = "http"
			},
			wantErr: `spec.source: Invalid value: bundle.spec.source.http must be set for source type "http"`,
		},
		{
			name: "upload type without upload", base: validBundle,
			mutate: func(o map[string]any) {
				source(o)["type"] = "upload"
			},
			wantErr: `spec.source: Invalid value: bundle.spec.source.upload must be set for source type "upload"`,
		},
		{
			name: "upload as RukPak's clients write it", base: validBundle,
			mutate: func(o map[string]any) {
				source(o)["type"] = "upload"
				source(o)["upload"] = map[string]any{}
				delete(source(o), "git")
			},
		},
		{
			name: "upload digest that is not a sha256", base: validBundle,
			mutate: func(o map[string]any) {
				source(o)["type"] = "upload"
				source(o)["upload"] = map[string]any{"digest": "md5:abc"}
				delete(source(o), "git")
			},
			wantErr: `spec.source.upload.digest: Invalid value: "md5:abc": spec.source.upload.digest in body should match '^sha256:[0-9a-f]{64}$'`,
		},
		{
			name: "git type without git", base: validBD,
			mutate: func(o map[string]any) {
				tmplSpec(o)["source"].(map[string]any)["type"] = "git"
			},
			wantErr: `spec.template.spec.source: Invalid value: bundle.spec.source.git must be set for source type "git"`,
		},
		{
			name: "two git refs (RukPak)", base: validBundle,
			mutate: func(o map[string]any) {
				source(o)["git"].(map[string]any)["ref"] = map[string]any{"commit": "9e3ab7f1a36302ef512294d5c9f2e9b9566b811e", "tag": "v0.0.1"}
			},
			wantErr: oneOfTwo("spec.source.git.ref"),
		},
		{
			name: "no git ref (RukPak)", base: validBundle,
			mutate: func(o map[string]any) {
				source(o)["git"].(map[string]any)["ref"] = map[string]any{}
			},
			wantErr: anyOrder(oneOfNone("spec.source.git.ref"), "spec.source.git.ref.branch: Required value", notChecked),
		},
		{
			name: "commit that is not a hash", base: validBundle,
			mutate: func(o map[string]any) {
				source(o)["git"].(map[string]any)["ref"] = map[string]any{"commit": "HEAD~1"}
			},
			wantErr: `spec.source.git.ref.commit: Invalid value: "HEAD~1": spec.source.git.ref.commit in body should match '^[0-9a-f]{4,64}$'`,
		},
		{
			name: "bad class name in bundle spec", base: validBundle,
			mutate:  func(o map[string]any) { spec(o)["provisionerClassName"] = "Core_Rukpak" },
			wantErr: `spec.provisionerClassName: Invalid value: "Core_Rukpak": spec.provisionerClassName in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'`,
		},
		{
			name: "missing class name", base: validBundle,
			mutate:  func(o map[string]any) { delete(spec(o), "provisionerClassName") },
			wantErr: "[spec.provisionerClassName: Required value, " + notChecked + "]",
		},
		{
			name: "bad class name in bundle deployment spec", base: validBD,
			mutate:  func(o map[string]any) { spec(o)["provisionerClassName"] = "-plain" },
			wantErr: `spec.provisionerClassName: Invalid value: "-plain": spec.provisionerClassName in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'`,
		},
		{
			name: "manual upgrade approval is accepted", base: validBD,
			mutate: func(o map[string]any) { spec(o)["upgradeApproval"] = "Manual" },
		},
		{
			name: "unknown upgrade approval", base: validBD,
			mutate:  func(o map[string]any) { spec(o)["upgradeApproval"] = "manual" },
			wantErr: `[spec.upgradeApproval: Unsupported value: "manual": supported values: "Automatic", "Manual", ` + notChecked + "]",
		},
		{
			name: "bad class name in template", base: validBD,
			mutate: func(o map[string]any) {
				tmplSpec(o)["provisionerClassName"] = "plain.v0"
			},
			wantErr: `spec.template.spec.provisionerClassName: Invalid value: "plain.v0": spec.template.spec.provisionerClassName in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'`,
		},
		{
			name: "two sources in template", base: validBD,
			mutate: func(o map[string]any) {
				tmplSpec(o)["source"].(map[string]any)["git"] = map[string]any{"repository": "https://x", "ref": map[string]any{"tag": "v1"}}
			},
			wantErr: oneOfTwo("spec.template.spec.source"),
		},
		{
			name: "two git refs in template", base: validBD,
			mutate: func(o map[string]any) {
				tmplSpec(o)["source"] = map[string]any{"type": "git", "git": map[string]any{"repository": "https://x", "ref": map[string]any{"tag": "v1", "branch": "main"}}}
			},
			wantErr: oneOfTwo("spec.template.spec.source.git.ref"),
		},
		{
			name: "template without spec", base: validBD,
			mutate:  func(o map[string]any) { delete(spec(o)["template"].(map[string]any), "spec") },
			wantErr: "[spec.template.spec: Required value, " + notChecked + "]",
		},
	}

	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := map[string]any{}
			if err := yaml.Unmarshal([]byte(tc.base), &obj); err != nil {
				t.Fatal(err)
			}
			if tc.mutate != nil {
				tc.mutate(obj)
			}
			if name := obj["metadata"].(map[string]any)["name"].(string); len(name) < 40 {
				// Unique names let every case run against one API server.
				setName(obj, name+"-"+strings.Repeat("x", i%3)+string(rune('a'+i%26)))
			}
			u := &unstructured.Unstructured{Object: obj}
			err := env.Client.Create(ctx, u)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("expected the object to be accepted, got: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("expected the API server to reject the object")
			}
			_, detail, ok := strings.Cut(err.Error(), " is invalid: ")
			if !ok || !sameErrors(detail, tc.wantErr) {
				t.Errorf("unexpected rejection\n got: %v\nwant: ... is invalid: %s", err, strings.ReplaceAll(tc.wantErr, "\x00", "\n  (any order) "))
			}
		})
	}

	// status.resolvedSource, written by provisioners, follows the same
	// schema: exactly one member, and exactly one git ref.
	t.Run("resolved source with two members", func(t *testing.T) {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(validBundle), &obj); err != nil {
			t.Fatal(err)
		}
		setName(obj, "resolved-two")
		u := &unstructured.Unstructured{Object: obj}
		if err := env.Client.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		resolved := map[string]any{"type": "git",
			"git":   map[string]any{"repository": "https://x", "ref": map[string]any{"commit": "abcdef0", "tag": "v1"}},
			"image": map[string]any{"ref": "quay.io/x/y@sha256:" + strings.Repeat("0", 64)}}
		u.Object["status"] = map[string]any{"resolvedSource": resolved}
		err := env.Client.Status().Update(ctx, u)
		// The API server names status as the field, the rest in the text.
		want := anyOrder(`status: Invalid value: "": "resolvedSource" must validate one and only one schema (oneOf). Found 2 valid alternatives`,
			`status: Invalid value: "": "resolvedSource.git.ref" must validate one and only one schema (oneOf). Found 2 valid alternatives`)
		if _, detail, _ := strings.Cut(fmt.Sprint(err), " is invalid: "); !sameErrors(detail, want) {
			t.Errorf("unexpected answer\n got: %v\nwant: ... is invalid: %s", err, want)
		}
		delete(resolved, "image")
		resolved["git"].(map[string]any)["ref"] = map[string]any{"commit": "abcdef0"}
		if err := env.Client.Status().Update(ctx, u); err != nil {
			t.Errorf("a resolved git source pinned to a commit: %v", err)
		}
	})
}

// The API server's words for a oneOf, and for the rules it does not check
// once the object has errors CEL rules cannot be run on.
const notChecked = "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"

func oneOfTwo(path string) string {
	return `<nil>: Invalid value: "": "` + path + `" must validate one and only one schema (oneOf). Found 2 valid alternatives`
}

func oneOfNone(path string) string {
	return `<nil>: Invalid value: "": "` + path + `" must validate one and only one schema (oneOf). Found none valid`
}

// anyOrder is the API server's list of errs in any order: the order of
// errors found in sibling fields varies from one request to the next.
func anyOrder(errs ...string) string { return "\x00" + strings.Join(errs, "\x00") }

// sameErrors compares the API server's detail with want, a message or an
// anyOrder list: got is then the list in brackets, each error once, none
// other (the lengths match).
func sameErrors(got, want string) bool {
	errs, ok := strings.CutPrefix(want, "\x00")
	if !ok {
		return got == want
	}
	list := strings.Split(errs, "\x00")
	if len(got) != len("["+strings.Join(list, ", ")+"]") || !strings.HasPrefix(got, "[") || !strings.HasSuffix(got, "]") {
		return false
	}
	for _, e := range list {
		if !strings.Contains(got, e) {
			return false
		}
	}
	return true
}

func setName(o map[string]any, name string) { o["metadata"].(map[string]any)["name"] = name }
func spec(o map[string]any) map[string]any  { return o["spec"].(map[string]any) }
func source(o map[string]any) map[string]any {
	return spec(o)["source"].(map[string]any)
}
func tmplSpec(o map[string]any) map[string]any {
	return spec(o)["template"].(map[string]any)["spec"].(map[string]any)
}
