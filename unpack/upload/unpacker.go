package upload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/archive"
)

// Unpacker unpacks upload sources from a Store.
type Unpacker struct {
	Store *Store
	// BaseDir holds the unpacked trees.
	BaseDir string
}

var _ unpack.Unpacker = (*Unpacker)(nil)

// WaitingMessage is the Unpacked message of an upload Bundle whose content
// did not arrive within one fetch's deadline.
func WaitingMessage(name string) string {
	return fmt.Sprintf("waiting for the content of bundle %q to be uploaded (rukpakctl run, or PUT /uploads/%s.tgz on the content service)", name, name)
}

// Unpack waits for the Bundle's archive (until ctx ends, the fetch
// deadline: the wait holds a goroutine, never a worker) and extracts it.
// The resolved source pins the archive's digest; an archive other than the
// spec's or the status's pin is refused.
func (u *Unpacker) Unpack(ctx context.Context, b *rukpakv1alpha1.Bundle) (*unpack.Result, error) {
	src := b.Spec.Source.Upload
	if b.Spec.Source.Type != rukpakv1alpha1.SourceTypeUpload || src == nil {
		return nil, unpack.Terminal(fmt.Errorf("bundle %q has no upload source", b.Name))
	}
	f, arrived, err := u.Store.open(b.UID)
	for err == nil && f == nil {
		select {
		case <-ctx.Done():
			return unpack.Pending(WaitingMessage(b.Name)), nil
		case <-arrived:
		}
		f, arrived, err = u.Store.open(b.UID)
	}
	if err != nil {
		return nil, fmt.Errorf("opening uploaded content: %w", err)
	}
	defer f.Close()
	tree, err := unpack.NewTempTree(filepath.Join(u.BaseDir, "upload"), b.Name+"-", u.Store.limits)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	r := io.TeeReader(f, h)
	err = archive.Extract(ctx, r, tree, archive.Options{RequireGzip: true})
	if err == nil {
		_, err = io.Copy(io.Discard, r)
	}
	if err != nil {
		_ = tree.Discard()
		if errors.Is(err, archive.ErrNotGzip) {
			return nil, unpack.Terminal(errors.New("gzip: invalid header: the uploaded content is not a gzip-compressed tar archive"))
		}
		return nil, fmt.Errorf("uploaded content: %w", err)
	}
	digest := "sha256:" + hex.EncodeToString(h.Sum(nil))
	for _, pin := range []string{src.Digest, resolvedDigest(b)} {
		if pin != "" && pin != digest {
			_ = tree.Discard()
			return nil, unpack.Terminal(fmt.Errorf("uploaded content has digest %s, the bundle pins %s", digest, pin))
		}
	}
	resolved := &rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeUpload, Upload: &rukpakv1alpha1.UploadSource{Digest: digest}}
	res := unpack.Unpacked(tree.FS(), resolved, tree.Discard)
	res.Message = "archive " + digest
	return res, nil
}

// Release removes the Bundle's archive: called by the Bundle's finalizer.
func (u *Unpacker) Release(b *rukpakv1alpha1.Bundle) error {
	if b.Spec.Source.Type != rukpakv1alpha1.SourceTypeUpload {
		return nil
	}
	return u.Store.Release(b.UID)
}

// resolvedDigest is the digest status.resolvedSource pins, if it is an
// upload source.
func resolvedDigest(b *rukpakv1alpha1.Bundle) string {
	rs := b.Status.ResolvedSource
	if rs == nil || rs.Type != rukpakv1alpha1.SourceTypeUpload || rs.Upload == nil {
		return ""
	}
	return rs.Upload.Digest
}
