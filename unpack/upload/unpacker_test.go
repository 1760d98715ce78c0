package upload

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
)

func commit(t *testing.T, s *Store, uid types.UID, data []byte) {
	t.Helper()
	rec, err := s.Receive(context.Background(), bytes.NewReader(data), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if res, _, err := s.Commit(uid, rec, ""); err != nil || res != Created {
		t.Fatalf("commit: %v %v", res, err)
	}
}

func TestUnpack(t *testing.T) {
	a, b := tarGz(t, archiveA), tarGz(t, archiveB)
	t.Run("waits for the upload", func(t *testing.T) {
		s, _ := NewStore(t.TempDir(), testLimits)
		u := &Unpacker{Store: s, BaseDir: t.TempDir()}
		bundle := uploadBundle("up", "00000000-0000-0000-0000-000000000001", "")
		got := make(chan *unpack.Result, 1)
		go func() {
			res, err := u.Unpack(context.Background(), bundle)
			if err != nil {
				t.Error(err)
			}
			got <- res
		}()
		commit(t, s, bundle.UID, a)
		res := <-got
		defer res.Close()
		if res.State != unpack.StateUnpacked {
			t.Fatalf("state %s: %s", res.State, res.Message)
		}
		if data, err := fs.ReadFile(res.FS, "manifests/a.yaml"); err != nil || string(data) != archiveA["manifests/a.yaml"] {
			t.Fatalf("content %q %v", data, err)
		}
		want := &rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeUpload, Upload: &rukpakv1alpha1.UploadSource{Digest: digestOfBytes(a)}}
		if res.ResolvedSource.Upload == nil || *res.ResolvedSource.Upload != *want.Upload || unpack.MatchesSpec(&bundle.Spec.Source, res.ResolvedSource) != nil {
			t.Fatalf("resolved %+v, want %+v", res.ResolvedSource, want)
		}
	})
	t.Run("nothing uploaded within the deadline", func(t *testing.T) {
		s, _ := NewStore(t.TempDir(), testLimits)
		u := &Unpacker{Store: s, BaseDir: t.TempDir()}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		res, err := u.Unpack(ctx, uploadBundle("up", "00000000-0000-0000-0000-000000000001", ""))
		if err != nil || res.State != unpack.StatePending || !strings.Contains(res.Message, "rukpakctl run") {
			t.Fatalf("got %+v %v, want Pending", res, err)
		}
	})
	for _, tc := range []struct {
		name   string
		bundle func() *rukpakv1alpha1.Bundle
	}{
		{"spec pins other content", func() *rukpakv1alpha1.Bundle {
			return uploadBundle("up", "00000000-0000-0000-0000-000000000001", digestOfBytes(b))
		}},
		{"status pins other content", func() *rukpakv1alpha1.Bundle {
			bu := uploadBundle("up", "00000000-0000-0000-0000-000000000001", "")
			bu.Status.ResolvedSource = &rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeUpload, Upload: &rukpakv1alpha1.UploadSource{Digest: digestOfBytes(b)}}
			return bu
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := NewStore(t.TempDir(), testLimits)
			u := &Unpacker{Store: s, BaseDir: t.TempDir()}
			bundle := tc.bundle()
			commit(t, s, bundle.UID, a)
			_, err := u.Unpack(context.Background(), bundle)
			if err == nil || !unpack.IsTerminal(err) || !strings.Contains(err.Error(), "the bundle pins "+digestOfBytes(b)) {
				t.Fatalf("got %v, want a terminal pin mismatch", err)
			}
		})
	}
}

func TestReleaseAndSweep(t *testing.T) {
	s, _ := NewStore(t.TempDir(), testLimits)
	a := tarGz(t, archiveA)
	kept, gone, released := types.UID("00000000-0000-0000-0000-00000000000a"), types.UID("00000000-0000-0000-0000-00000000000b"), types.UID("00000000-0000-0000-0000-00000000000c")
	for _, uid := range []types.UID{kept, gone, released} {
		commit(t, s, uid, a)
	}
	u := &Unpacker{Store: s}
	if err := u.Release(uploadBundle("x", string(released), "")); err != nil || s.Has(released) {
		t.Fatalf("release: %v, still stored %v", err, s.Has(released))
	}
	stale := filepath.Join(s.dir, tempPrefix+"crashed")
	if err := os.WriteFile(stale, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	_ = os.Chtimes(stale, old, old)
	// An archive newer than the list is another Bundle's, created since.
	n, err := s.Sweep(KeepUIDs([]types.UID{kept}), time.Now().Add(-time.Minute), time.Minute)
	if err != nil || n != 1 || !s.Has(gone) {
		t.Fatalf("sweep with an old list: removed %d (%v), want only the stale temporary file", n, err)
	}
	n, err = s.Sweep(KeepUIDs([]types.UID{kept}), time.Now().Add(time.Second), time.Minute)
	if err != nil || n != 1 || s.Has(gone) || !s.Has(kept) {
		t.Fatalf("sweep: removed %d (%v); gone stored %v, kept stored %v", n, err, s.Has(gone), s.Has(kept))
	}
	if _, err := s.path("../../etc/passwd"); err == nil {
		t.Fatal("a UID with a path was accepted")
	}
}
