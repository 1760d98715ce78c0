package storage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

func bundle(name string) *rukpakv1alpha1.Bundle {
	return &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// dirEntries lists the names in dir, to prove what a reader could see.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestLocalDirectoryStoreLoad(t *testing.T) {
	ctx := context.Background()
	s := &LocalDirectory{RootDirectory: filepath.Join(t.TempDir(), "created-on-demand")}
	src := nested()
	if err := s.Store(ctx, bundle("my-bundle"), src); err != nil {
		t.Fatalf("Store: %v", err)
	}
	got, err := s.Load(ctx, bundle("my-bundle"))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	assertSameContent(t, src, got)

	info, err := os.Stat(filepath.Join(s.RootDirectory, "my-bundle.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o644 {
		t.Errorf("archive mode %v, want 0644", info.Mode().Perm())
	}

	// Store replaces content.
	replacement := fstest.MapFS{"manifests/only.yaml": {Data: []byte("kind: Only\n")}}
	if err := s.Store(ctx, bundle("my-bundle"), replacement); err != nil {
		t.Fatalf("second Store: %v", err)
	}
	got, err = s.Load(ctx, bundle("my-bundle"))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	assertSameContent(t, replacement, got)
	if names := dirEntries(t, s.RootDirectory); len(names) != 1 {
		t.Errorf("directory holds %v, want only my-bundle.tgz", names)
	}
}

func TestLocalDirectoryStoreIsDeterministic(t *testing.T) {
	ctx := context.Background()
	s := &LocalDirectory{RootDirectory: t.TempDir()}
	digest := func() [32]byte {
		b, err := os.ReadFile(filepath.Join(s.RootDirectory, "b.tgz"))
		if err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(b)
	}
	if err := s.Store(ctx, bundle("b"), nested()); err != nil {
		t.Fatal(err)
	}
	first := digest()

	// The same content again, from disk this time, with other mtimes.
	dir := t.TempDir()
	if err := os.CopyFS(dir, nested()); err != nil {
		t.Fatal(err)
	}
	then := time.Date(2010, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, then, then)
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Store(ctx, bundle("b"), os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if second := digest(); first != second {
		t.Fatalf("storing the same content twice gave sha256 %x then %x", first, second)
	}
}

func TestLocalDirectoryMissingAndDelete(t *testing.T) {
	ctx := context.Background()
	s := &LocalDirectory{RootDirectory: t.TempDir()}
	if _, err := s.Load(ctx, bundle("missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of missing content: got %v, want fs.ErrNotExist", err)
	}
	if err := s.Store(ctx, bundle("b"), nested()); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := s.Delete(ctx, bundle("b")); err != nil {
			t.Fatalf("Delete #%d: %v", i+1, err)
		}
	}
	if _, err := s.Load(ctx, bundle("b")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load after Delete: got %v, want fs.ErrNotExist", err)
	}
	// Deleting from a directory that was never created is fine too.
	never := &LocalDirectory{RootDirectory: filepath.Join(t.TempDir(), "never")}
	if err := never.Delete(ctx, bundle("b")); err != nil {
		t.Fatalf("Delete with no directory: %v", err)
	}
}

func TestLocalDirectoryExists(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := &LocalDirectory{RootDirectory: dir}
	check := func(when string, want bool) {
		t.Helper()
		got, err := s.Exists(ctx, bundle("b"))
		if err != nil || got != want {
			t.Errorf("Exists %s = %v, %v; want %v", when, got, err, want)
		}
	}
	check("before Store", false)
	// A temporary file a crashed Store left is not content.
	if err := os.WriteFile(filepath.Join(dir, ".b.tgz.tmp-1"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("with only a temporary file", false)
	if err := s.Store(ctx, bundle("b"), nested()); err != nil {
		t.Fatal(err)
	}
	check("after Store", true)
	if err := s.Delete(ctx, bundle("b")); err != nil {
		t.Fatal(err)
	}
	check("after Delete", false)
	if _, err := s.Exists(ctx, bundle("../x")); err == nil {
		t.Errorf("Exists accepted a name that is not a bundle name")
	}
}

// An archive left by another process (a restart) is read through once: a
// whole one is kept, one torn by a machine crash is removed so its Bundle
// is unpacked again.
func TestLocalDirectoryExistsChecksArchivesItDidNotWrite(t *testing.T) {
	ctx := context.Background()
	written := func(t *testing.T) (string, []byte) {
		dir := t.TempDir()
		if err := (&LocalDirectory{RootDirectory: dir}).Store(ctx, bundle("b"), nested()); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, "b.tgz"))
		if err != nil {
			t.Fatal(err)
		}
		return dir, data
	}
	for _, tc := range []struct {
		name   string
		damage func(data []byte) []byte
		want   bool
	}{
		{"whole", func(d []byte) []byte { return d }, true},
		{"cut in half", func(d []byte) []byte { return d[:len(d)/2] }, false},
		{"gzip trailer missing", func(d []byte) []byte { return d[:len(d)-8] }, false},
		{"empty", func([]byte) []byte { return nil }, false},
		{"zeroed blocks", func(d []byte) []byte { return append(d[:10:10], make([]byte, len(d)-10)...) }, false},
		{"not gzip", func([]byte) []byte { return []byte("apiVersion: v1\n") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, data := written(t)
			file := filepath.Join(dir, "b.tgz")
			if err := os.WriteFile(file, tc.damage(data), 0o644); err != nil {
				t.Fatal(err)
			}
			restarted := &LocalDirectory{RootDirectory: dir}
			got, err := restarted.Exists(ctx, bundle("b"))
			if err != nil || got != tc.want {
				t.Fatalf("Exists = %v, %v; want %v", got, err, tc.want)
			}
			_, statErr := os.Stat(file)
			if tc.want {
				if _, err := restarted.Load(ctx, bundle("b")); err != nil {
					t.Errorf("Load after a successful check: %v", err)
				}
			} else if !errors.Is(statErr, fs.ErrNotExist) {
				t.Errorf("the broken archive was left in place: %v", statErr)
			}
		})
	}

	// The writing process trusts its own file, until it changes.
	dir := t.TempDir()
	s := &LocalDirectory{RootDirectory: dir}
	if err := s.Store(ctx, bundle("b"), nested()); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Exists(ctx, bundle("b")); !ok || err != nil {
		t.Fatalf("Exists after Store = %v, %v", ok, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.tgz"), []byte("torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Exists(ctx, bundle("b")); ok || err != nil {
		t.Fatalf("Exists after the file changed = %v, %v; want false", ok, err)
	}
}

func TestLocalDirectoryRejectsBadNames(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := &LocalDirectory{RootDirectory: filepath.Join(dir, "store"), BaseURL: "https://example.test"}
	for _, name := range []string{"", "../escape", "a/b", ".hidden", "UPPER", strings.Repeat("a", 254)} {
		t.Run(fmt.Sprintf("%.20q", name), func(t *testing.T) {
			b := bundle(name)
			if err := s.Store(ctx, b, nested()); err == nil || !strings.Contains(err.Error(), "invalid bundle name") {
				t.Errorf("Store: got %v, want an invalid bundle name error", err)
			}
			if _, err := s.Load(ctx, b); err == nil || !strings.Contains(err.Error(), "invalid bundle name") {
				t.Errorf("Load: got %v, want an invalid bundle name error", err)
			}
			if err := s.Delete(ctx, b); err == nil || !strings.Contains(err.Error(), "invalid bundle name") {
				t.Errorf("Delete: got %v, want an invalid bundle name error", err)
			}
			if _, err := s.URLFor(ctx, b); err == nil || !strings.Contains(err.Error(), "invalid bundle name") {
				t.Errorf("URLFor: got %v, want an invalid bundle name error", err)
			}
		})
	}
	if names := dirEntries(t, dir); len(names) != 0 {
		t.Errorf("bad names wrote %v", names)
	}
	if _, err := s.Load(ctx, nil); err == nil {
		t.Error("Load(nil) succeeded")
	}
}

func TestLocalDirectoryURLFor(t *testing.T) {
	tests := []struct {
		base, want string
	}{
		{"https://rukpak-core.rukpak-system.svc", "https://rukpak-core.rukpak-system.svc/bundles/my-bundle.tgz"},
		{"https://rukpak-core.rukpak-system.svc:8443/", "https://rukpak-core.rukpak-system.svc:8443/bundles/my-bundle.tgz"},
		{"https://proxy.example/content", "https://proxy.example/content/bundles/my-bundle.tgz"},
	}
	for _, tt := range tests {
		s := &LocalDirectory{RootDirectory: t.TempDir(), BaseURL: tt.base}
		got, err := s.URLFor(context.Background(), bundle("my-bundle"))
		if err != nil || got != tt.want {
			t.Errorf("URLFor with base %q = %q, %v; want %q", tt.base, got, err, tt.want)
		}
	}
	if _, err := (&LocalDirectory{}).URLFor(context.Background(), bundle("b")); err == nil {
		t.Error("URLFor without a base URL succeeded")
	}
}

// failingFS fails reading one file part-way, as a crash or I/O error in the
// middle of a Store would.
type failingFS struct {
	fstest.MapFS
	failOn string
}

type failingFile struct{ fs.File }

func (failingFile) Read([]byte) (int, error) { return 0, errors.New("injected read failure") }

func (f failingFS) Open(name string) (fs.File, error) {
	file, err := f.MapFS.Open(name)
	if err == nil && name == f.failOn {
		return failingFile{file}, nil
	}
	return file, err
}

func TestLocalDirectoryFailedStoreLeavesNoPartialFile(t *testing.T) {
	ctx := context.Background()
	s := &LocalDirectory{RootDirectory: t.TempDir()}
	broken := failingFS{MapFS: nested(), failOn: "manifests/b.json"}

	// A first Store that fails leaves nothing at all.
	err := s.Store(ctx, bundle("new"), broken)
	if err == nil || !strings.Contains(err.Error(), "injected read failure") {
		t.Fatalf("Store: got %v, want the injected failure", err)
	}
	if names := dirEntries(t, s.RootDirectory); len(names) != 0 {
		t.Fatalf("failed Store left %v behind", names)
	}

	// A failing replacement keeps the previous content, intact.
	if err := s.Store(ctx, bundle("old"), nested()); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(s.RootDirectory, "old.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Store(ctx, bundle("old"), broken); err == nil {
		t.Fatal("Store of broken content succeeded")
	}
	after, err := os.ReadFile(filepath.Join(s.RootDirectory, "old.tgz"))
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("failed Store changed the previous content (err %v)", err)
	}
	if names := dirEntries(t, s.RootDirectory); len(names) != 1 {
		t.Fatalf("directory holds %v, want only old.tgz", names)
	}
}

func TestLocalDirectoryCrashBeforeRename(t *testing.T) {
	// A process that died after writing its temporary file but before the
	// rename leaves exactly such a file: no reader may see it as content.
	ctx := context.Background()
	s := &LocalDirectory{RootDirectory: t.TempDir()}
	full := archive(t, nested())
	stale := filepath.Join(s.RootDirectory, tempPrefix+"crashed.tgz.tmp-123")
	if err := os.WriteFile(stale, full[:len(full)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, bundle("crashed")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load after a crash: got %v, want fs.ErrNotExist", err)
	}

	// A fresh temporary file may belong to a Store in progress: kept.
	fresh := filepath.Join(s.RootDirectory, tempPrefix+"busy.tgz.tmp-456")
	if err := os.WriteFile(fresh, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	unrelated := filepath.Join(s.RootDirectory, ".keep")
	if err := os.WriteFile(unrelated, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{stale, unrelated} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Store(ctx, bundle("kept"), nested()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(s.RootDirectory, "kept.tgz"), old, old); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveStaleTempFiles(10 * time.Minute); err != nil {
		t.Fatalf("RemoveStaleTempFiles: %v", err)
	}
	got := strings.Join(dirEntries(t, s.RootDirectory), ",")
	if want := ".busy.tgz.tmp-456,.keep,kept.tgz"; got != want {
		t.Fatalf("after cleanup the directory holds %s, want %s", got, want)
	}
	if err := (&LocalDirectory{RootDirectory: filepath.Join(t.TempDir(), "none")}).RemoveStaleTempFiles(0); err != nil {
		t.Fatalf("RemoveStaleTempFiles with no directory: %v", err)
	}
}

func TestLocalDirectoryConcurrentBundles(t *testing.T) {
	ctx := context.Background()
	s := &LocalDirectory{RootDirectory: t.TempDir()}
	const bundles, rounds = 24, 5
	content := func(i, round int) fstest.MapFS {
		return fstest.MapFS{
			"manifests/cm.yaml": {Data: fmt.Appendf(nil, "bundle: %d\nround: %d\n", i, round)},
			"manifests/big.txt": {Data: bytes.Repeat([]byte{byte(i)}, 64<<10)},
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, bundles*rounds*4)
	for i := range bundles {
		b := bundle(fmt.Sprintf("bundle-%d", i))
		// One writer per bundle storing new rounds, while a reader loads
		// whatever is there: each load must be one complete round.
		wg.Go(func() {
			for round := range rounds {
				if err := s.Store(ctx, b, content(i, round)); err != nil {
					errs <- err
				}
			}
			if i%2 == 0 {
				if err := s.Delete(ctx, b); err != nil {
					errs <- err
				}
			}
		})
		wg.Go(func() {
			for range rounds {
				fsys, err := s.Load(ctx, b)
				if errors.Is(err, fs.ErrNotExist) {
					continue // not stored yet, or deleted already
				}
				if err != nil {
					errs <- err
					continue
				}
				data, err := fs.ReadFile(fsys, "manifests/cm.yaml")
				if err != nil || !strings.HasPrefix(string(data), fmt.Sprintf("bundle: %d\n", i)) {
					errs <- fmt.Errorf("%s: loaded %q: %w", b.Name, data, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range bundles {
		b := bundle(fmt.Sprintf("bundle-%d", i))
		fsys, err := s.Load(ctx, b)
		if i%2 == 0 {
			if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s: deleted, but Load gave %v", b.Name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", b.Name, err)
			continue
		}
		assertSameContent(t, content(i, rounds-1), fsys)
	}
	for _, name := range dirEntries(t, s.RootDirectory) {
		if isTempFile(name) {
			t.Errorf("temporary file %s left behind", name)
		}
	}
}
