package registry

import (
	"bytes"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rukpak-dev/rukpak/provisioner/plain"
)

// TestRenderEqualsDecodedConversion proves Objects gives exactly the objects
// that decoding Convert's manifests gives (values and their types), for
// every real bundle of the shared test data, in two install modes: all
// namespaces, and the install namespace only. A bundle that does not
// support a mode fails the same way both ways.
func TestRenderEqualsDecodedConversion(t *testing.T) {
	modes := map[string]Options{
		"default": {},
		"all":     {InstallNamespace: "render-system"},
		"own":     {InstallNamespace: "render-own", WatchNamespaces: []string{"render-own"}},
	}
	var dirs []string
	for _, root := range []string{corpusDir, "../../../shared/testdata/fleet"} {
		entries, err := os.ReadDir(root)
		if err != nil {
			t.Skipf("shared test data not available: %v", err)
		}
		for _, e := range entries {
			if e.IsDir() {
				dirs = append(dirs, filepath.Join(root, e.Name()))
			}
		}
	}
	compared, handedOver := map[string]int{}, map[string]int{}
	for _, dir := range dirs {
		for mode, opts := range modes {
			t.Run(filepath.Base(dir)+"/"+mode, func(t *testing.T) {
				fsys := os.DirFS(dir)
				var want []any
				converted, werr := Convert(fsys, opts)
				if werr == nil {
					objs, err := plain.Objects(converted)
					if err != nil {
						t.Fatalf("decoding the conversion: %v", err)
					}
					for _, o := range objs {
						want = append(want, o.Object)
					}
					checkHandedOver(t, converted, want)
					handedOver[mode]++
				}
				objs, gerr := Objects(fsys, opts)
				if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
					t.Fatalf("Objects error %v, conversion error %v", gerr, werr)
				}
				if werr != nil {
					return
				}
				var got []any
				for _, o := range objs {
					got = append(got, o.Object)
				}
				if len(got) != len(want) {
					t.Fatalf("%d objects rendered, %d decoded from the conversion", len(got), len(want))
				}
				for i := range got {
					if !reflect.DeepEqual(got[i], want[i]) {
						t.Errorf("object %d (%s %s) differs from the decoded conversion", i, objs[i].GetKind(), objs[i].GetName())
					}
				}
				compared[mode]++
			})
		}
	}
	t.Logf("bundles compared: %v of %d; their objects handed over: %v", compared, len(dirs), handedOver)
	if compared["all"] == 0 || compared["own"] == 0 {
		t.Errorf("no bundle installable in some mode was compared: %v", compared)
	}
}

// checkHandedOver asserts that converted hands over, once, its manifests
// with exactly the objects decoding them gives (want), sharing no part.
func checkHandedOver(t *testing.T, converted fs.FS, want []any) {
	t.Helper()
	d, ok := converted.(plain.Decoded)
	if !ok {
		t.Fatal("the conversion does not hand over its objects")
	}
	files, heap := d.TakeDecoded()
	if files == nil || heap <= 0 {
		t.Fatal("the conversion's objects were not handed over (a part shared)")
	}
	if len(files) != len(want) {
		t.Fatalf("%d objects handed over, %d decoded", len(files), len(want))
	}
	for i, f := range files {
		if !reflect.DeepEqual(f.Object, want[i]) {
			t.Errorf("handed-over object %d (%s) differs from the decoded one", i, f.Name)
		}
		got, err := fs.ReadFile(converted, path.Join(plain.ManifestsDir, f.Name))
		if err != nil || !bytes.Equal(got, f.Data) {
			t.Errorf("handed-over file %s is not the manifest's bytes (%v)", f.Name, err)
		}
	}
	if again, _ := d.TakeDecoded(); again != nil {
		t.Error("the objects were handed over twice")
	}
}

// TestDecodedForm pins the types Objects gives values a generator might
// build in Go: those JSON decoding gives.
func TestDecodedForm(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in, want any
	}{
		{"int", 3, int64(3)},
		{"int32", int32(3), int64(3)},
		{"integral float", 2.0, int64(2)},
		{"fraction", 2.5, 2.5},
		{"huge float", 1e21, 1e21},
		{"typed list", []string{"a"}, []any{"a"}},
		{"typed map", map[string]string{"a": "b"}, map[string]any{"a": "b"}},
		{"nested", map[string]any{"l": []any{int32(1), map[string]any{"n": 1}}}, map[string]any{"l": []any{int64(1), map[string]any{"n": int64(1)}}}},
		{"kept", map[string]any{"s": "x", "b": true, "n": nil, "i": int64(7)}, map[string]any{"s": "x", "b": true, "n": nil, "i": int64(7)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodedForm(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decodedForm(%#v) = %#v, want %#v", tc.in, got, tc.want)
			}
		})
	}
}
