// Package sources picks the Unpacker for a Bundle's source type.
package sources

import (
	"context"
	"fmt"
	"strings"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/configmaps"
	"github.com/rukpak-dev/rukpak/unpack/git"
	"github.com/rukpak-dev/rukpak/unpack/httpsrc"
	"github.com/rukpak-dev/rukpak/unpack/image"
)

// Unpacker dispatches on spec.source.type (or the resolved source's type,
// which is the same).
type Unpacker struct {
	bySource map[rukpakv1alpha1.SourceType]unpack.Unpacker
	image    *image.Unpacker
}

// New returns an Unpacker for every source type this project supports.
func New(cfg unpack.Config) *Unpacker {
	img := image.New(cfg)
	return &Unpacker{image: img, bySource: map[rukpakv1alpha1.SourceType]unpack.Unpacker{
		rukpakv1alpha1.SourceTypeImage:      img,
		rukpakv1alpha1.SourceTypeGit:        git.New(cfg),
		rukpakv1alpha1.SourceTypeConfigMaps: configmaps.New(cfg),
		rukpakv1alpha1.SourceTypeHTTP:       httpsrc.New(cfg),
	}}
}

// Register adds (or replaces) the Unpacker of a source type: the upload
// source, whose store the content server shares.
func (u *Unpacker) Register(t rukpakv1alpha1.SourceType, impl unpack.Unpacker) {
	u.bySource[t] = impl
}

// Release drops what a source keeps for one Bundle (an uploaded archive),
// when the Bundle is deleted.
func (u *Unpacker) Release(b *rukpakv1alpha1.Bundle) error {
	r, ok := u.bySource[b.Spec.Source.Type].(interface {
		Release(*rukpakv1alpha1.Bundle) error
	})
	if !ok {
		return nil
	}
	return r.Release(b)
}

// Unpack implements unpack.Unpacker.
func (u *Unpacker) Unpack(ctx context.Context, b *rukpakv1alpha1.Bundle) (*unpack.Result, error) {
	t := b.Spec.Source.Type
	impl, ok := u.bySource[t]
	if !ok {
		return nil, unpack.Terminal(fmt.Errorf("unsupported source type %q", t))
	}
	return impl.Unpack(ctx, b)
}

// Forget drops what is cached for a resolved source (an image's unpacked
// tree, kept by digest), once no Bundle uses it any more.
func (u *Unpacker) Forget(resolved *rukpakv1alpha1.BundleSource) error {
	if resolved == nil || resolved.Type != rukpakv1alpha1.SourceTypeImage || resolved.Image == nil {
		return nil
	}
	if !strings.Contains(resolved.Image.Ref, "@") {
		return nil
	}
	return u.image.Forget(resolved.Image.Ref)
}
