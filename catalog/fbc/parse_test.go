package fbc

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

// TestParsePackageEqualsReadPackage reads every real package as the
// content service serves it and compares with ReadPackage of the stored
// document.
func TestParsePackageEqualsReadPackage(t *testing.T) {
	all := fstest.MapFS{}
	for _, c := range realCatalogs {
		all[c.name+"/catalog.yaml"] = &fstest.MapFile{Data: realFile(t, c.name)}
	}
	dir := t.TempDir()
	x, err := Build(all, dir, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range realCatalogs {
		t.Run(c.name, func(t *testing.T) {
			want, err := ReadPackage(dir, x, c.name)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParsePackage(served(t, dir, x, c.name), c.name, 0)
			if err != nil {
				t.Fatal(err)
			}
			got.strict, got.seen = false, false
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("ParsePackage differs from ReadPackage:\n%+v\n%+v", got, want)
			}
		})
	}
}

// served is the package's section of the stored document, as
// storage's catalog handler serves it.
func served(t *testing.T, dir string, x *Index, name string) io.Reader {
	t.Helper()
	pi, ok := x.Package(name)
	if !ok {
		t.Fatalf("no package %q", name)
	}
	data, err := os.ReadFile(filepath.Join(dir, DocumentFile))
	if err != nil {
		t.Fatal(err)
	}
	return strings.NewReader(string(data[pi.Offset : pi.Offset+pi.Length]))
}

func TestParsePackageHostile(t *testing.T) {
	const pkg = `{"schema":"olm.package","name":"p","defaultChannel":"stable"}` + "\n"
	const bundle = `{"schema":"olm.bundle","package":"p","name":"p.v1","image":"r/p@sha256:1","properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.0.0"}}]}` + "\n"
	for _, tc := range []struct {
		name, doc string
		limit     int64
		want      string
		tooLarge  bool
	}{
		{name: "valid", doc: pkg + bundle},
		{name: "exactly the limit", doc: pkg + bundle, limit: int64(len(pkg + bundle))},
		{name: "one byte over the limit", doc: pkg + bundle, limit: int64(len(pkg+bundle)) - 1, want: "over 220 bytes", tooLarge: true},
		{name: "endless", doc: pkg + strings.Repeat(bundle, 10_000), limit: 4096, want: "over 4096 bytes", tooLarge: true},
		{name: "no olm.package", doc: bundle, want: "no olm.package blob"},
		{name: "another package", doc: strings.ReplaceAll(pkg, `"p"`, `"q"`) + bundle, want: `names package "q"`},
		{name: "another package's bundle", doc: pkg + strings.ReplaceAll(bundle, `"package":"p"`, `"package":"q"`), want: `olm.bundle blob belongs to package "q"`},
		{name: "not JSON", doc: pkg + "{\n", want: "unexpected end of JSON input"},
		{name: "no schema", doc: pkg + "{}\n", want: "a line has no schema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePackage(strings.NewReader(tc.doc), "p", tc.limit)
			if tc.want == "" {
				if err != nil || p.DefaultChannel != "stable" || len(p.Bundles) != 1 || p.Bundles[0].Version != "1.0.0" {
					t.Fatalf("got %+v, %v", p, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrPackageTooLarge) != tc.tooLarge {
				t.Fatalf("error %v, want one containing %q (too large: %v)", err, tc.want, tc.tooLarge)
			}
		})
	}
}
