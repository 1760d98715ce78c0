// Package image unpacks Bundles whose source is an OCI image, in process
// with go-containerregistry: no pods, no container runtime.
//
// The reference is resolved to a digest first, and the digest is what the
// Bundle keeps (status.resolvedSource): a re-unpack uses it, so a moved tag
// never changes an existing Bundle's content. Layers are streamed, in order,
// through archive.Extract into a tree cached by digest, so one digest is
// pulled once no matter how many Bundles use it.
package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sync/singleflight"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/archive"
)

// Unpacker unpacks image sources. Its BaseDir is its own: trees under
// BaseDir/images are shared between Bundles and never modified once written.
type Unpacker struct {
	cfg unpack.Config
	// pulls collapses concurrent pulls of one digest into one.
	pulls singleflight.Group
	// sweep removes trees a crashed process left half extracted.
	sweep      sync.Once
	transports transports
	// backoff, when set, replaces go-containerregistry's retry backoff
	// (tests use it to fail fast).
	backoff *remote.Backoff
}

var _ unpack.Unpacker = (*Unpacker)(nil)

// New returns an image Unpacker.
func New(cfg unpack.Config) *Unpacker {
	cfg.Limits = cfg.Limits.OrDefault()
	return &Unpacker{cfg: cfg}
}

// Unpack resolves the Bundle's image to a digest and returns its flattened
// filesystem. The returned Result's FS is read-only; the cached tree behind
// it is shared and outlives Close (see Forget).
func (u *Unpacker) Unpack(ctx context.Context, bundle *rukpakv1alpha1.Bundle) (*unpack.Result, error) {
	src := bundle.Spec.Source.Image
	if bundle.Spec.Source.Type != rukpakv1alpha1.SourceTypeImage || src == nil {
		return nil, unpack.Terminal(fmt.Errorf("bundle %q has no image source", bundle.Name))
	}
	// Pinned by an earlier unpack: only the digest comes from status, and
	// only when status names the spec's repository (unpack.FetchSource).
	refStr := unpack.FetchSource(bundle).Image.Ref
	ref, err := name.ParseReference(refStr)
	if err != nil {
		return nil, unpack.Terminal(fmt.Errorf("invalid image reference %q: %w", refStr, err))
	}

	opts, err := u.remoteOptions(ctx, src)
	if err != nil {
		return nil, err
	}
	digest, err := resolve(ref, opts)
	if err != nil {
		return nil, classify(refStr, err)
	}
	pinned := ref.Context().Digest(digest.String())

	tree, err := u.pull(ctx, pinned, digest, opts)
	if err != nil {
		return nil, err
	}
	resolved := bundle.Spec.Source.DeepCopy()
	resolved.Image.Ref = pinned.String()
	return unpack.Unpacked(tree.FS(), resolved, tree.Close), nil
}

func (u *Unpacker) remoteOptions(ctx context.Context, src *rukpakv1alpha1.ImageSource) ([]remote.Option, error) {
	kc, err := u.pullSecretKeychain(ctx, src.ImagePullSecretName)
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", src.Ref, err)
	}
	tr, err := u.transports.get(src)
	if err != nil {
		return nil, err
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc), remote.WithTransport(tr)}
	if u.backoff != nil {
		opts = append(opts, remote.WithRetryBackoff(*u.backoff))
	}
	return opts, nil
}

// resolve returns the digest ref names, asking the registry unless ref
// already is a digest.
func resolve(ref name.Reference, opts []remote.Option) (v1.Hash, error) {
	if d, ok := ref.(name.Digest); ok {
		return v1.NewHash(d.DigestStr())
	}
	desc, err := remote.Head(ref, opts...)
	if err != nil {
		return v1.Hash{}, err
	}
	return desc.Digest, nil
}

// pull opens the cached tree of digest, extracting it first if needed.
func (u *Unpacker) pull(ctx context.Context, ref name.Digest, digest v1.Hash, opts []remote.Option) (*unpack.Tree, error) {
	if tree, err := u.cached(digest); err != nil || tree != nil {
		return tree, err
	}
	_, err, _ := u.pulls.Do(digest.String(), func() (any, error) {
		// Another caller may have finished while we waited.
		tree, err := u.cached(digest)
		if err != nil || tree != nil {
			if tree != nil {
				_ = tree.Close()
			}
			return nil, err
		}
		return nil, u.extract(ctx, ref, digest, u.cacheDir(digest), opts)
	})
	if err != nil {
		return nil, err
	}
	tree, err := u.cached(digest)
	if err == nil && tree == nil {
		// Forgotten (its last Bundle deleted) as it was extracted.
		err = fmt.Errorf("image cache entry for %s was removed while in use; retrying", digest)
	}
	return tree, err
}

func (u *Unpacker) extract(ctx context.Context, ref name.Digest, digest v1.Hash, dir string, opts []remote.Option) error {
	img, err := remote.Image(ref, opts...)
	if err != nil {
		return classify(ref.String(), err)
	}
	layers, err := img.Layers()
	if err != nil {
		return classify(ref.String(), err)
	}
	u.sweep.Do(func() { _ = os.RemoveAll(u.tmpDir()) })
	if err := os.MkdirAll(u.tmpDir(), 0o755); err != nil {
		return fmt.Errorf("creating image cache: %w", err)
	}
	tmp, err := os.MkdirTemp(u.tmpDir(), digest.Hex[:min(len(digest.Hex), 12)]+"-")
	if err != nil {
		return fmt.Errorf("creating image cache: %w", err)
	}
	tree, err := unpack.NewTree(tmp, u.cfg.Limits)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	defer tree.Close()
	for i, layer := range layers {
		if err := u.extractLayer(ctx, layer, tree); err != nil {
			_ = os.RemoveAll(tmp)
			return classify(ref.String(), fmt.Errorf("layer %d: %w", i, err))
		}
	}
	if err := tree.Seal(); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	return commit(tmp, dir)
}

// extractLayer streams one layer into tree and reads it to the end, which is
// where go-containerregistry verifies the blob's digest.
func (u *Unpacker) extractLayer(ctx context.Context, layer v1.Layer, tree *unpack.Tree) error {
	rc, err := layer.Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := archive.Extract(ctx, rc, tree, archive.Options{Whiteouts: true}); err != nil {
		return err
	}
	// What follows the end-of-archive marker is padding; bound it anyway.
	n, err := io.CopyN(io.Discard, rc, u.cfg.Limits.MaxBytes+1)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading layer: %w", err)
	}
	if n > u.cfg.Limits.MaxBytes {
		return unpack.Terminal(fmt.Errorf("layer has more than %d bytes after its end-of-archive marker", u.cfg.Limits.MaxBytes))
	}
	return nil
}
