package unpack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
			err := tc.write(NewTree(root, tc.limits))
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

func TestTreeReplacesSymlinkInsteadOfWritingThroughIt(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	target := filepath.Join(dir, "target")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := NewTree(root, DefaultLimits).WriteFile("link", strings.NewReader("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(target); string(data) != "keep" {
		t.Errorf("write went through the symlink: target now %q", data)
	}
}
