package v1alpha1_test

import (
	"context"
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
			name: "bundle name over 52 characters", base: validBundle,
			mutate:  func(o map[string]any) { setName(o, long(53)) },
			wantErr: "<nil>: Invalid value: metadata.name must be at most 52 characters",
		},
		{
			name: "bundle deployment name of 45 characters is accepted", base: validBD,
			mutate: func(o map[string]any) { setName(o, long(45)) },
		},
		{
			name: "bundle deployment name over 45 characters", base: validBD,
			mutate:  func(o map[string]any) { setName(o, long(46)) },
			wantErr: "<nil>: Invalid value: metadata.name must be at most 45 characters",
		},
		{
			name: "two sources", base: validBundle,
			mutate: func(o map[string]any) {
				source(o)["image"] = map[string]any{"ref": "quay.io/x/y:v1"}
			},
			wantErr: "spec.source: Invalid value: source.image must be set if and only if source.type is image",
		},
		{
			name: "no source at all", base: validBundle,
			mutate:  func(o map[string]any) { delete(spec(o), "source") },
			wantErr: "[spec.source: Required value, <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]",
		},
		{
			name: "source without a type", base: validBundle,
			mutate:  func(o map[string]any) { delete(source(o), "type") },
			wantErr: "[spec.source.type: Required value, <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]",
		},
		{
			name: "unknown source type", base: validBundle,
			mutate:  func(o map[string]any) { source(o)["type"] = "oci" },
			wantErr: `[spec.source.type: Unsupported value: "oci": supported values: "image", "git", "configMaps", "http", "upload", <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]`,
		},
		{
			name: "type whose member is missing", base: validBundle,
			mutate:  func(o map[string]any) { source(o)["type"] = "image" },
			wantErr: "[spec.source: Invalid value: source.image must be set if and only if source.type is image, spec.source: Invalid value: source.git must be set if and only if source.type is git]",
		},
		{
			name: "configMaps type without configMaps", base: validBundle,
			mutate: func(o map[string]any) {
				source(o)["type"] = "configMaps"
				delete(source(o), "git")
			},
			wantErr: "spec.source: Invalid value: source.configMaps must be set if and only if source.type is configMaps",
		},
		{
			name: "http type without http", base: validBundle,
			mutate: func(o map[string]any) {
				source(o)["type"] = "http"
				delete(source(o), "git")
			},
			wantErr: "spec.source: Invalid value: source.http must be set if and only if source.type is http",
		},
		{
			name: "upload type without upload", base: validBundle,
			mutate: func(o map[string]any) {
				source(o)["type"] = "upload"
				delete(source(o), "git")
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
			name: "two git refs", base: validBundle,
			mutate: func(o map[string]any) {
				source(o)["git"].(map[string]any)["ref"] = map[string]any{"tag": "v0.0.2", "branch": "main"}
			},
			wantErr: "spec.source.git.ref: Invalid value: exactly one of ref.branch, ref.tag or ref.commit must be set",
		},
		{
			name: "no git ref", base: validBundle,
			mutate: func(o map[string]any) {
				source(o)["git"].(map[string]any)["ref"] = map[string]any{}
			},
			wantErr: "spec.source.git.ref: Invalid value: exactly one of ref.branch, ref.tag or ref.commit must be set",
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
			wantErr: "[spec.provisionerClassName: Required value, <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]",
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
			wantErr: `[spec.upgradeApproval: Unsupported value: "manual": supported values: "Automatic", "Manual", <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]`,
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
			wantErr: "spec.template.spec.source: Invalid value: source.git must be set if and only if source.type is git",
		},
		{
			name: "template without spec", base: validBD,
			mutate:  func(o map[string]any) { delete(spec(o)["template"].(map[string]any), "spec") },
			wantErr: "[spec.template.spec: Required value, <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]",
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
			if !ok || detail != tc.wantErr {
				t.Errorf("unexpected rejection\n got: %v\nwant: ... is invalid: %s", err, tc.wantErr)
			}
		})
	}
}

func setName(o map[string]any, name string) { o["metadata"].(map[string]any)["name"] = name }
func spec(o map[string]any) map[string]any  { return o["spec"].(map[string]any) }
func source(o map[string]any) map[string]any {
	return spec(o)["source"].(map[string]any)
}
func tmplSpec(o map[string]any) map[string]any {
	return spec(o)["template"].(map[string]any)["spec"].(map[string]any)
}
