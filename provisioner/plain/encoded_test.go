package plain

import (
	"fmt"
	"path"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/rukpak-dev/rukpak/internal/jsonmap"
)

// TestCheckEncoded holds CheckEncoded to its contract: it passes only
// files that Objects reads back as their objects, one each in order, and
// all such files but those not written as Encoded says; it fails with
// Objects' own message where Objects fails.
func TestCheckEncoded(t *testing.T) {
	cm := func(name string, extra map[string]any) map[string]any {
		o := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}}
		for k, v := range extra {
			o[k] = v
		}
		return o
	}
	nested := func(depth int) any {
		var v any = "leaf"
		for range depth {
			v = []any{v}
		}
		return v
	}
	long := strings.Repeat("x", 4000)
	tests := []struct {
		name    string
		limits  Limits
		objects []map[string]any
		// edit changes the files after encoding.
		edit    func([]Encoded) []Encoded
		wantErr string
		// sameErr: Objects fails with the same message.
		sameErr bool
		// strict: refused although Objects reads it back.
		strict bool
	}{
		{name: "two objects", objects: []map[string]any{cm("a", nil), cm("b", map[string]any{"data": map[string]any{"k": "<&>"}})}},
		{
			name: "a file over the file limit", limits: Limits{MaxFileBytes: 1000},
			objects: []map[string]any{cm("a", map[string]any{"data": map[string]any{"k": long}})},
			wantErr: "decode manifests/00.json: file is larger than 1000 bytes", sameErr: true,
		},
		{
			name: "files over the total", limits: Limits{MaxTotalBytes: 6000},
			objects: []map[string]any{cm("a", map[string]any{"data": map[string]any{"k": long}}), cm("b", map[string]any{"data": map[string]any{"k": long}})},
			wantErr: "the files of manifests/ are larger than 6000 bytes together", sameErr: true,
		},
		{
			name: "a document over the document limit", limits: Limits{MaxDocumentBytes: 1000},
			objects: []map[string]any{cm("a", map[string]any{"data": map[string]any{"k": long}})},
			wantErr: "decode manifests/00.json: document 0 is larger than 1000 bytes", sameErr: true,
		},
		{
			name: "a document over the node limit", limits: Limits{MaxNodes: 100},
			objects: []map[string]any{cm("a", map[string]any{"l": make([]any, 200)})},
			wantErr: "decode manifests/00.json: document 0 has more than 100 YAML nodes", sameErr: true,
		},
		{
			name: "documents over the total node limit", limits: Limits{MaxTotalNodes: 300},
			objects: []map[string]any{cm("a", map[string]any{"l": make([]any, 200)}), cm("b", map[string]any{"l": make([]any, 200)})},
			wantErr: "the files of manifests/ hold more than 300 YAML nodes together", sameErr: true,
		},
		{
			name: "nested over the depth limit", limits: Limits{MaxDepth: 20},
			objects: []map[string]any{cm("a", map[string]any{"l": nested(30)})},
			wantErr: "decode manifests/00.json: document 0 is nested more than 20 levels deep", sameErr: true,
		},
		{
			name:    "an object without a name",
			objects: []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{}}},
			wantErr: "decode manifests/00.json: document 0: object is missing required fields: metadata.name", sameErr: true,
		},
		{
			// Objects would install the Secret in its items instead.
			name: "an object shaped like a List",
			objects: []map[string]any{cm("outer", map[string]any{"items": []any{
				map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "inner"}},
			}})},
			wantErr: `decode manifests/00.json: document 0: ConfigMap "outer" has a top-level items list, so it would be read as a List of its items`,
		},
		{
			name:    "files out of name order",
			objects: []map[string]any{cm("a", nil), cm("b", nil)},
			edit:    func(f []Encoded) []Encoded { f[0], f[1] = f[1], f[0]; return f },
			wantErr: "the files of manifests/ are not in name order",
		},
		{
			name:    "JSON on more than one line",
			objects: []map[string]any{cm("a", nil)},
			edit: func(f []Encoded) []Encoded {
				f[0].Data = []byte(strings.Replace(string(f[0].Data), ",", ",\n", 1))
				return f
			},
			wantErr: "decode manifests/00.json: not one JSON object on one line", strict: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files := make([]Encoded, len(tc.objects))
			for i, o := range tc.objects {
				data, err := jsonmap.Encode(o)
				if err != nil {
					t.Fatal(err)
				}
				files[i] = Encoded{Name: fmt.Sprintf("%02d.json", i), Data: data, Object: o}
			}
			if tc.edit != nil {
				files = tc.edit(files)
			}
			err := tc.limits.CheckEncoded(files)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr) {
				t.Fatalf("CheckEncoded: %v, want error %q", err, tc.wantErr)
			}

			fsys := fstest.MapFS{}
			for _, f := range files {
				fsys[path.Join(ManifestsDir, f.Name)] = &fstest.MapFile{Data: f.Data}
			}
			objs, objErr := tc.limits.Objects(fsys)
			readBack := objErr == nil && len(objs) == len(files)
			for i := 0; readBack && i < len(objs); i++ {
				readBack = reflect.DeepEqual(objs[i].Object, normalised(t, files[i].Data))
			}
			if err == nil && !readBack || err != nil && readBack && !tc.strict {
				t.Errorf("CheckEncoded says %v, but Objects read the files back as their objects: %v (error %v)", err, readBack, objErr)
			}
			if tc.sameErr && (objErr == nil || objErr.Error() != tc.wantErr) {
				t.Errorf("Objects: %v, want the same error as CheckEncoded", objErr)
			}
		})
	}
}

// normalised is the object data encodes, as decoding gives it.
func normalised(t *testing.T, data []byte) map[string]any {
	t.Helper()
	m, err := jsonmap.Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
