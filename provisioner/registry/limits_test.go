package registry

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/rukpak-dev/rukpak/provisioner/plain"
)

// billionLaughs is 10^9 nodes from under 1 KB of aliases.
func billionLaughs(head string) string {
	var b strings.Builder
	b.WriteString(head)
	b.WriteString("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n")
	for c := 'b'; c <= 'i'; c++ {
		fmt.Fprintf(&b, "%c: &%c [", c, c)
		for i := range 10 {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "*%c", c-1)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// The bundle metadata registry+v1 decodes itself is bounded like manifests.
func TestHostileMetadata(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		data    []byte
		opts    Options
		wantErr string
	}{
		{
			name:    "annotations alias bomb",
			file:    AnnotationsFile,
			data:    []byte(billionLaughs(testAnnotations)),
			wantErr: "decode metadata/annotations.yaml: document 0 expands to more than 262144 YAML nodes through aliases",
		},
		{
			name:    "annotations of 8 MiB",
			file:    AnnotationsFile,
			data:    append([]byte(testAnnotations+"x: "), bytes.Repeat([]byte("x"), 8<<20)...),
			wantErr: "decode metadata/annotations.yaml: file is larger than 3 MiB",
		},
		{
			name:    "annotations flow list",
			file:    AnnotationsFile,
			data:    []byte(testAnnotations + "x: [" + strings.Repeat("0,", 1<<20) + "0]\n"),
			wantErr: "decode metadata/annotations.yaml: document 0 has more than 262144 YAML nodes",
		},
		{
			name:    "manifests within the caller's limits",
			file:    "manifests/list.yaml",
			data:    []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\nl: [" + strings.Repeat("0,", 1000) + "0]\n"),
			opts:    Options{Limits: plain.Limits{MaxNodes: 1000}},
			wantErr: "decode manifests/list.yaml: document 0 has more than 1000 YAML nodes",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := testBundle(t, testCSV(installModeOrder...))
			fsys[tc.file] = &fstest.MapFile{Data: tc.data}
			var err error
			allocated := allocatedBy(func() { _, err = Convert(fsys, tc.opts) })
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("got error %v, want %q", err, tc.wantErr)
			}
			if allocated > 64<<20 {
				t.Errorf("refusing allocated %d MiB, want < 64 MiB", allocated>>20)
			}
		})
	}

	t.Run("dependencies alias bomb", func(t *testing.T) {
		fsys := fstest.MapFS{DependenciesFile: {Data: []byte(billionLaughs("dependencies: []\n"))}}
		_, err := Dependencies(fsys)
		if want := "decode metadata/dependencies.yaml: document 0 expands to more than 262144 YAML nodes through aliases"; err == nil || err.Error() != want {
			t.Fatalf("got error %v, want %q", err, want)
		}
	})
}

// Converting keeps the source bundle where it is: a large file beside the
// manifests costs no memory, and is still part of the stored content.
func TestConvertDoesNotCopyTheSource(t *testing.T) {
	fsys := testBundle(t, testCSV(installModeOrder...))
	fsys["tests/blob.bin"] = &fstest.MapFile{Data: bytes.Repeat([]byte{1}, 64<<20)}
	var out fstest.MapFS
	allocated := allocatedBy(func() {
		converted, err := Convert(fsys, Options{})
		if err != nil {
			t.Fatal(err)
		}
		out = fstestCopy(t, converted) // reads everything: the copy is the test's
	})
	if blob := out[SourceDir+"/tests/blob.bin"]; blob == nil || len(blob.Data) != 64<<20 {
		t.Fatal("the converted content lacks registry+v1/tests/blob.bin")
	}
	// 64 MiB for the test's own copy; Convert used to hold a second one.
	if allocated > 100<<20 {
		t.Errorf("converting allocated %d MiB, want < 100 MiB", allocated>>20)
	}
	converted, err := Convert(fsys, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(converted, "manifests", SourceDir+"/manifests/foos.crd.yaml", SourceDir+"/metadata/annotations.yaml", SourceDir+"/tests/blob.bin"); err != nil {
		t.Fatalf("converted content is not a well-behaved fs.FS: %v", err)
	}
}

func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A conversion that installs would not read back as the objects rendered
// fails at unpack: here a List item that is itself shaped like a List (a
// ConfigMap with an items list), which the decoder would replace with the
// Secret inside it, unlike Objects with a config.
func TestConvertRefusesWhatInstallsReadOtherwise(t *testing.T) {
	fsys := testBundle(t, testCSV(installModeOrder...))
	fsys["manifests/list.yaml"] = &fstest.MapFile{Data: []byte(`apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: outer}
  items:
  - {apiVersion: v1, kind: Secret, metadata: {name: inner}}
`)}
	_, err := Convert(fsys, Options{})
	const want = `the converted manifests cannot be installed: decode manifests/`
	const wantEnd = `_configmap_outer.json: document 0: ConfigMap "outer" has a top-level items list, so it would be read as a List of its items`
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), wantEnd) {
		t.Fatalf("got error %v, want %q...%q", err, want, wantEnd)
	}
}
