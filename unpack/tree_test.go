package unpack

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/rukpak-dev/rukpak/internal/testfiles"
)

func TestCleanName(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{in: "manifests/a.yaml", want: "manifests/a.yaml"},
		{in: "./manifests//a.yaml", want: "manifests/a.yaml"},
		{in: "manifests/../a.yaml", want: "a.yaml"},
		{in: `manifests\a.yaml`, want: "manifests/a.yaml"},
		{in: ".", want: "."},
		{in: "../x", err: `path "../x" escapes the bundle root`},
		{in: "a/../../x", err: `path "a/../../x" escapes the bundle root`},
		{in: "..", err: `path ".." escapes the bundle root`},
		{in: "/etc/passwd", err: `path "/etc/passwd" is absolute`},
		{in: `\etc\passwd`, err: `path "\\etc\\passwd" is absolute`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := CleanName(tc.in)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("CleanName(%q) error = %v, want %q", tc.in, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("CleanName(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestTreeLimits(t *testing.T) {
	tests := []struct {
		name   string
		limits Limits
		write  func(*Tree) error
		err    string
	}{
		{
			name:   "within limits",
			limits: Limits{MaxBytes: 10, MaxFiles: 3},
			write: func(tr *Tree) error {
				if err := tr.Mkdir("manifests"); err != nil {
					return err
				}
				return tr.WriteFile("manifests/a", strings.NewReader("0123456789"), 0o644)
			},
		},
		{
			name:   "one byte over the size limit",
			limits: Limits{MaxBytes: 10, MaxFiles: 3},
			write: func(tr *Tree) error {
				return tr.WriteFile("a", strings.NewReader("0123456789x"), 0o644)
			},
			err: "bundle content exceeds the limit of 10 bytes (at a)",
		},
		{
			name:   "size is counted across files",
			limits: Limits{MaxBytes: 10, MaxFiles: 3},
			write: func(tr *Tree) error {
				if err := tr.WriteFile("a", strings.NewReader("012345"), 0o644); err != nil {
					return err
				}
				return tr.WriteFile("b", strings.NewReader("012345"), 0o644)
			},
			err: "bundle content exceeds the limit of 10 bytes (at b)",
		},
		{
			name:   "too many files",
			limits: Limits{MaxBytes: 100, MaxFiles: 2},
			write: func(tr *Tree) error {
				for _, n := range []string{"a", "b", "c"} {
					if err := tr.WriteFile(n, strings.NewReader("x"), 0o644); err != nil {
						return err
					}
				}
				return nil
			},
			err: "bundle has more than 2 files and directories",
		},
		{
			name:   "implied parent directories count as files",
			limits: Limits{MaxFiles: 3},
			write: func(tr *Tree) error {
				return tr.WriteFile("a/b/c/d", strings.NewReader("x"), 0o644)
			},
			err: "bundle has more than 3 files and directories",
		},
		{
			name:   "implied parents of a directory count too",
			limits: Limits{MaxFiles: 2},
			write:  func(tr *Tree) error { return tr.Mkdir("a/b/c") },
			err:    "bundle has more than 2 files and directories",
		},
		{
			name:   "existing parents are not counted again",
			limits: Limits{MaxFiles: 4},
			write: func(tr *Tree) error {
				for _, n := range []string{"a/b/c", "a/b/d"} { // a, a/b, a/b/c, a/b/d
					if err := tr.WriteFile(n, strings.NewReader("x"), 0o644); err != nil {
						return err
					}
				}
				return nil
			},
		},
		{
			name:   "one file over the file size limit",
			limits: Limits{MaxBytes: 100, MaxFileBytes: 4},
			write: func(tr *Tree) error {
				return tr.WriteFile("dir/big", strings.NewReader("01234"), 0o644)
			},
			err: "file dir/big is larger than the limit of 4 bytes",
		},
		{
			name:   "a file at the file size limit",
			limits: Limits{MaxBytes: 100, MaxFileBytes: 4},
			write: func(tr *Tree) error {
				return tr.WriteFile("dir/big", strings.NewReader("0123"), 0o644)
			},
		},
		{
			name:   "path too long",
			limits: Limits{MaxPathBytes: 8},
			write: func(tr *Tree) error {
				return tr.WriteFile("abcd/efgh", strings.NewReader("x"), 0o644)
			},
			err: `path "abcd/efgh" is 9 bytes long, more than the limit of 8`,
		},
		{
			name:   "a long path is cut in the message",
			limits: Limits{MaxPathBytes: 100},
			write: func(tr *Tree) error {
				return tr.Mkdir(strings.Repeat("a", 150))
			},
			err: `path "` + strings.Repeat("a", 100) + `..." is 150 bytes long, more than the limit of 100`,
		},
		{
			name:   "path too deep",
			limits: Limits{MaxPathDepth: 3},
			write: func(tr *Tree) error {
				return tr.WriteFile("a/b/c/d", strings.NewReader("x"), 0o644)
			},
			err: `path "a/b/c/d" is 4 levels deep, more than the limit of 3`,
		},
		{
			name:   "depth counts the cleaned path",
			limits: Limits{MaxPathDepth: 3},
			write: func(tr *Tree) error {
				return tr.WriteFile("./a/x/../b/./c", strings.NewReader("x"), 0o644)
			},
		},
		{
			name:   "whiteouts are held to the path limits",
			limits: Limits{MaxPathDepth: 2},
			write:  func(tr *Tree) error { return tr.Remove("a/b/c") },
			err:    `path "a/b/c" is 3 levels deep, more than the limit of 2`,
		},
		{
			name:   "opaque whiteouts are held to the path limits",
			limits: Limits{MaxPathBytes: 4},
			write:  func(tr *Tree) error { return tr.RemoveUnder("abc/de", func(string) bool { return false }) },
			err:    `path "abc/de" is 6 bytes long, more than the limit of 4`,
		},
		{
			name:   "all names together are bounded, implied parents included",
			limits: Limits{MaxNameBytes: 10},
			write: func(tr *Tree) error {
				return tr.WriteFile("abc/def/g", strings.NewReader("x"), 0o644) // 3 + 7 + 9 bytes
			},
			err: `bundle paths total more than the limit of 10 bytes (at "abc/def/g")`,
		},
		{
			name:   "escaping write",
			limits: DefaultLimits,
			write: func(tr *Tree) error {
				return tr.WriteFile("../outside", strings.NewReader("x"), 0o644)
			},
			err: `path "../outside" escapes the bundle root`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "root")
			if err := os.Mkdir(root, 0o755); err != nil {
				t.Fatal(err)
			}
			tree, err := NewTree(root, tc.limits)
			if err != nil {
				t.Fatal(err)
			}
			defer tree.Close()
			err = tc.write(tree)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || err.Error() != tc.err {
				t.Fatalf("error = %v, want %q", err, tc.err)
			}
			if !IsTerminal(err) {
				t.Errorf("error %q is retryable; content errors must be terminal", err)
			}
			if _, statErr := os.Stat(filepath.Join(filepath.Dir(root), "outside")); statErr == nil {
				t.Errorf("a file was written outside the root")
			}
		})
	}
}

func newTree(t *testing.T) *Tree {
	t.Helper()
	tree, err := NewTree(t.TempDir(), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tree.Close() })
	return tree
}

func write(t *testing.T, tree *Tree, files ...string) {
	t.Helper()
	for _, f := range files {
		name, body, _ := strings.Cut(f, "=")
		if err := tree.WriteFile(name, strings.NewReader(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTreeReplacesAndRemoves(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Tree) error
		want []string
		err  string
	}{
		{
			name: "a file replaces a file",
			edit: func(tr *Tree) error { return tr.WriteFile("a/x", strings.NewReader("new"), 0o644) },
			want: []string{"a/x=new", "a/y=y", "b/c/z=z", "top=top"},
		},
		{
			name: "a file replaces a directory and everything in it",
			edit: func(tr *Tree) error { return tr.WriteFile("b", strings.NewReader("file"), 0o644) },
			want: []string{"a/x=x", "a/y=y", "b=file", "top=top"},
		},
		{
			name: "remove a directory",
			edit: func(tr *Tree) error { return tr.Remove("b") },
			want: []string{"a/x=x", "a/y=y", "top=top"},
		},
		{
			name: "remove what is not there",
			edit: func(tr *Tree) error { return tr.Remove("nothing/here") },
			want: []string{"a/x=x", "a/y=y", "b/c/z=z", "top=top"},
		},
		{
			name: "remove under a directory, keeping some",
			edit: func(tr *Tree) error { return tr.RemoveUnder("a", func(n string) bool { return n == "a/y" }) },
			want: []string{"a/y=y", "b/c/z=z", "top=top"},
		},
		{
			name: "remove under the root",
			edit: func(tr *Tree) error { return tr.RemoveUnder(".", func(n string) bool { return n == "top" }) },
			want: []string{"top=top"},
		},
		{
			name: "a removed directory comes back empty",
			edit: func(tr *Tree) error {
				if err := tr.Remove("b"); err != nil {
					return err
				}
				return tr.WriteFile("b/c/new", strings.NewReader("new"), 0o644)
			},
			want: []string{"a/x=x", "a/y=y", "b/c/new=new", "top=top"},
		},
		{
			name: "a file cannot go under a file",
			edit: func(tr *Tree) error { return tr.WriteFile("top/x", strings.NewReader("x"), 0o644) },
			err:  `cannot create "top/x": "top" is a file, not a directory`,
		},
		{
			name: "a directory cannot go over a file",
			edit: func(tr *Tree) error { return tr.Mkdir("top") },
			err:  `cannot create directory "top": a file of that name exists`,
		},
		{
			name: "the root cannot be removed",
			edit: func(tr *Tree) error { return tr.Remove("./") },
			err:  `path "./" cannot be removed`,
		},
		{
			name: "escaping removal",
			edit: func(tr *Tree) error { return tr.Remove("a/../../etc") },
			err:  `path "a/../../etc" escapes the bundle root`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tree := newTree(t)
			write(t, tree, "a/x=x", "a/y=y", "b/c/z=z", "top=top")
			err := tc.edit(tree)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error = %v, want %q", err, tc.err)
				}
				// Content that clashes with itself stays broken: retrying
				// cannot fix it.
				if !IsTerminal(err) {
					t.Errorf("error %q is retryable", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := testfiles.List(t, tree.FS()); !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			var names []string
			for _, w := range tc.want {
				name, _, _ := strings.Cut(w, "=")
				names = append(names, name)
			}
			if err := fstest.TestFS(tree.FS(), names...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The FS passes the standard library's filesystem conformance checks, and
// a sealed tree reads back the same from disk.
func TestTreeFS(t *testing.T) {
	dir := t.TempDir()
	tree, err := NewTree(dir, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	write(t, tree, "manifests/a.yaml=a", "manifests/sub/b.yaml=b", "empty=", "old=gone")
	if err := tree.Mkdir("emptydir"); err != nil {
		t.Fatal(err)
	}
	if err := tree.WriteFile("bin/run", strings.NewReader("#!"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := tree.Remove("old"); err != nil {
		t.Fatal(err)
	}
	files := []string{"bin/run", "empty", "emptydir", "manifests/a.yaml", "manifests/sub/b.yaml"}
	if err := fstest.TestFS(tree.FS(), files...); err != nil {
		t.Fatal(err)
	}
	if err := tree.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := tree.Close(); err != nil {
		t.Fatal(err)
	}

	reopened, err := OpenTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	if err := fstest.TestFS(reopened.FS(), files...); err != nil {
		t.Fatal(err)
	}
	want := []string{"bin/run=#!", "empty=", "manifests/a.yaml=a", "manifests/sub/b.yaml=b"}
	if got := testfiles.List(t, reopened.FS()); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if info, err := fs.Stat(reopened.FS(), "bin/run"); err != nil || info.Mode() != 0o755 {
		t.Errorf("bin/run: %v, %v; want mode 0755", info, err)
	}
}

func TestOpenTreeRefusesIncompleteTrees(t *testing.T) {
	sealed := func(t *testing.T) string {
		dir := t.TempDir()
		tree, err := NewTree(dir, DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		defer tree.Close()
		write(t, tree, "manifests/a.yaml=0123456789")
		if err := tree.Seal(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for name, damage := range map[string]func(dir string) error{
		"no index":           func(dir string) error { return os.Remove(filepath.Join(dir, "index.json")) },
		"index not JSON":     func(dir string) error { return os.WriteFile(filepath.Join(dir, "index.json"), []byte("{"), 0o600) },
		"spool cut short":    func(dir string) error { return os.Truncate(filepath.Join(dir, "data"), 4) },
		"an older cache dir": os.RemoveAll,
		"entry without parent": func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "index.json"), []byte(`{".":{"dir":true},"a/b":{}}`), 0o600)
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := sealed(t)
			if err := damage(dir); err != nil {
				t.Fatal(err)
			}
			if _, err := OpenTree(dir); !errors.Is(err, ErrNoTree) {
				t.Fatalf("OpenTree = %v, want ErrNoTree", err)
			}
		})
	}
}
