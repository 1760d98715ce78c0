package plain

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

const sharedTestdata = "../../../shared/testdata/plain"

func sharedBundle(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(sharedTestdata, name)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("shared test data not available: %v", err)
	}
	return dir
}

func TestComboBundles(t *testing.T) {
	t.Run("combo-v0.0.2 is valid", func(t *testing.T) {
		fsys := os.DirFS(sharedBundle(t, "combo-v0.0.2"))
		if err := Validate(fsys); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		objs, err := Objects(fsys)
		if err != nil {
			t.Fatalf("Objects: %v", err)
		}
		var got []string
		for _, o := range objs {
			got = append(got, o.GetKind()+"/"+o.GetName())
		}
		want := []string{
			"CustomResourceDefinition/templates.combo.io",
			"CustomResourceDefinition/combinations.combo.io",
			"Namespace/combo",
			"ServiceAccount/combo-operator",
			"ClusterRole/combo-operator",
			"ClusterRoleBinding/combo-operator",
			"Deployment/combo-operator",
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("objects:\n got %v\nwant %v", got, want)
		}
	})
	t.Run("combo-4567031-pre-deflate has a subdirectory", func(t *testing.T) {
		err := Validate(os.DirFS(sharedBundle(t, "combo-4567031-pre-deflate")))
		want := `subdirectories are not allowed within the "manifests" directory of the bundle image filesystem: found "manifests/crds"`
		if err == nil || err.Error() != want {
			t.Fatalf("got error %v, want %q", err, want)
		}
	})
}

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }

const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n"

func TestValidateAndObjects(t *testing.T) {
	tests := []struct {
		name    string
		fsys    fstest.MapFS
		want    []string // kind/name in order
		wantErr string   // exact message; empty means success
	}{
		{
			name:    "no manifests directory",
			fsys:    fstest.MapFS{"metadata/annotations.yaml": file("annotations: {}")},
			wantErr: "readdir manifests: file does not exist",
		},
		{
			name:    "empty manifests directory",
			fsys:    fstest.MapFS{"manifests": &fstest.MapFile{Mode: 0o755 | os.ModeDir}},
			wantErr: "found zero objects: plain+v0 bundles are required to contain at least one object",
		},
		{
			name:    "only empty documents",
			fsys:    fstest.MapFS{"manifests/a.yaml": file("---\n# nothing\n---\n")},
			wantErr: "found zero objects: plain+v0 bundles are required to contain at least one object",
		},
		{
			name: "subdirectory",
			fsys: fstest.MapFS{
				"manifests/a.yaml":     file(strings.ReplaceAll(cm, "%s", "a")),
				"manifests/sub/b.yaml": file(strings.ReplaceAll(cm, "%s", "b")),
			},
			wantErr: `subdirectories are not allowed within the "manifests" directory of the bundle image filesystem: found "manifests/sub"`,
		},
		{
			name: "multi-document YAML with empty documents, files in name order",
			fsys: fstest.MapFS{
				"manifests/b.yaml": file("---\n" + strings.ReplaceAll(cm, "%s", "b1") + "---\n---\n" + strings.ReplaceAll(cm, "%s", "b2")),
				"manifests/a.yaml": file(strings.ReplaceAll(cm, "%s", "a")),
			},
			want: []string{"ConfigMap/a", "ConfigMap/b1", "ConfigMap/b2"},
		},
		{
			name: "JSON file",
			fsys: fstest.MapFS{
				"manifests/a.json": file(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{}}`),
			},
			want: []string{"Secret/s"},
		},
		{
			name: "List is flattened",
			fsys: fstest.MapFS{
				"manifests/list.yaml": file(`apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: one}}
- {apiVersion: v1, kind: ServiceAccount, metadata: {name: two}}
`),
			},
			want: []string{"ConfigMap/one", "ServiceAccount/two"},
		},
		{
			name: "List item without a name",
			fsys: fstest.MapFS{
				"manifests/list.yaml": file("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {}}\n"),
			},
			wantErr: "decode manifests/list.yaml: document 0: item 0: object is missing required fields: metadata.name",
		},
		{
			name: "missing name in second document",
			fsys: fstest.MapFS{
				"manifests/a.yaml": file(strings.ReplaceAll(cm, "%s", "a") + "---\napiVersion: v1\nkind: ConfigMap\n"),
			},
			wantErr: "decode manifests/a.yaml: document 1: object is missing required fields: metadata.name",
		},
		{
			// Files decode in parallel; the error is still the first
			// broken file in name order.
			name: "several broken files",
			fsys: func() fstest.MapFS {
				m := fstest.MapFS{}
				for i := range 50 {
					m[fmt.Sprintf("manifests/%02d.yaml", i)] = file(strings.ReplaceAll(cm, "%s", fmt.Sprintf("cm-%02d", i)))
				}
				m["manifests/20.yaml"] = file("kind: ConfigMap\n")
				m["manifests/40.yaml"] = file(": not yaml")
				return m
			}(),
			wantErr: "decode manifests/20.yaml: document 0: object is missing required fields: apiVersion, metadata.name",
		},
		{
			name: "missing apiVersion and kind",
			fsys: fstest.MapFS{
				"manifests/a.yaml": file("metadata:\n  name: x\n"),
			},
			wantErr: "decode manifests/a.yaml: document 0: object is missing required fields: apiVersion, kind",
		},
		{
			name: "malformed YAML names the file",
			fsys: fstest.MapFS{
				"manifests/bad.yaml": file("apiVersion: v1\nkind: [ConfigMap\n"),
			},
			wantErr: "decode manifests/bad.yaml: document 0: ",
		},
		{
			name: "a scalar document is malformed",
			fsys: fstest.MapFS{
				"manifests/bad.yaml": file("just a string\n"),
			},
			wantErr: "decode manifests/bad.yaml: document 0: ",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.fsys)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Validate succeeded, want error %q", tc.wantErr)
				}
				// Malformed-YAML messages come from the YAML parser; pin our prefix.
				if strings.HasSuffix(tc.wantErr, ": ") {
					if !strings.HasPrefix(err.Error(), tc.wantErr) {
						t.Fatalf("got error %q, want prefix %q", err, tc.wantErr)
					}
					return
				}
				if err.Error() != tc.wantErr {
					t.Fatalf("got error %q, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			objs, err := Objects(tc.fsys)
			if err != nil {
				t.Fatalf("Objects: %v", err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.GetKind()+"/"+o.GetName())
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("objects: got %v, want %v", got, tc.want)
			}
		})
	}
}

// Integers must decode as int64 like everywhere else in Kubernetes, so
// conversions to typed objects and unstructured helpers work.
func TestDecodeKeepsIntegers(t *testing.T) {
	objs, err := Decode("d.yaml", []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := objs[0].Object["spec"].(map[string]interface{})["replicas"].(int64); !ok || got != 3 {
		t.Fatalf("replicas = %#v, want int64(3)", objs[0].Object["spec"].(map[string]interface{})["replicas"])
	}
}
