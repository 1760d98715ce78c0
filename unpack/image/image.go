// Package image unpacks Bundles whose source is an OCI image, in process
// with go-containerregistry: no pods, no container runtime.
//
// The reference is resolved to a digest first, and the digest is what the
// Bundle keeps (status.resolvedSource): a re-unpack uses it, so a moved tag
// never changes an existing Bundle's content. Layers are streamed, in order,
// through archive.Extract into a tree cached by digest, so one digest is
// pulled once no matter how many Bundles use it. Of a Helm OCI chart
// artifact (`helm push`), only the chart layer is content.
package image

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

	// One deadline and one download budget for the whole fetch, every
	// request and every retry of it.
	ctx, cancel := context.WithTimeout(ctx, u.cfg.Limits.FetchTimeout)
	defer cancel()
	opts, err := u.remoteOptions(ctx, src, newFetchBudget(u.cfg.Limits.MaxFetchBytes))
	if err != nil {
		return nil, err
	}
	digest, err := resolve(ref, opts)
	if err != nil {
		return nil, u.classify(ctx, refStr, err)
	}
	pinned := ref.Context().Digest(digest.String())

	tree, err := u.pull(ctx, pinned, digest, opts)
	if err != nil {
		return nil, u.classify(ctx, refStr, err)
	}
	resolved := bundle.Spec.Source.DeepCopy()
	resolved.Image.Ref = pinned.String()
	return unpack.Unpacked(tree.FS(), resolved, tree.Close), nil
}

func (u *Unpacker) remoteOptions(ctx context.Context, src *rukpakv1alpha1.ImageSource, budget *fetchBudget) ([]remote.Option, error) {
	kc, err := u.pullSecretKeychain(ctx, src.ImagePullSecretName)
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", src.Ref, err)
	}
	tr, err := u.transports.get(src)
	if err != nil {
		return nil, err
	}
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(kc),
		remote.WithTransport(&limitedTransport{base: tr, budget: budget}),
	}
	if u.backoff != nil {
		opts = append(opts, remote.WithRetryBackoff(*u.backoff))
	}
	return opts, nil
}

// resolve returns the digest ref names, as the registry answers it with
// opts' credentials.
func resolve(ref name.Reference, opts []remote.Option) (v1.Hash, error) {
	// Asked of the registry for a digest too, with this Bundle's own
	// credentials: the tree cache is keyed by digest alone, so without it
	// a Bundle naming any repository (or none that exists) at the digest
	// of an image another Bundle pulled with a pull secret got that
	// private image's content (an outside review).
	var digest v1.Hash
	if desc, err := remote.Head(ref, opts...); err == nil {
		digest = desc.Digest
	} else {
		// A HEAD answer has no body: the registry's own words for the
		// refusal (MANIFEST_UNKNOWN, DENIED: ...) come with a GET.
		full, gerr := remote.Get(ref, opts...)
		if gerr != nil {
			return v1.Hash{}, gerr
		}
		digest = full.Digest
	}
	if d, ok := ref.(name.Digest); ok && digest.String() != d.DigestStr() {
		return v1.Hash{}, fmt.Errorf("registry answered digest %s for %s", digest, d)
	}
	return digest, nil
}

// pull opens the cached tree of digest, extracting it first if needed.
func (u *Unpacker) pull(ctx context.Context, ref name.Digest, digest v1.Hash, opts []remote.Option) (*unpack.Tree, error) {
	img := imageOf(ref, digest)
	if tree, err := u.cached(img); err != nil || tree != nil {
		return tree, err
	}
	_, err, _ := u.pulls.Do(img.String(), func() (any, error) {
		// Another caller may have finished while we waited.
		tree, err := u.cachedOrClear(img)
		if err != nil || tree != nil {
			if tree != nil {
				_ = tree.Close()
			}
			return nil, err
		}
		return nil, u.extract(ctx, ref, digest, u.cacheDir(img), opts)
	})
	if err != nil {
		return nil, err
	}
	tree, err := u.cached(img)
	if err == nil && tree == nil {
		// Forgotten (its last Bundle deleted) as it was extracted.
		err = fmt.Errorf("image cache entry for %s was removed while in use; retrying", digest)
	}
	return tree, err
}

func (u *Unpacker) extract(ctx context.Context, ref name.Digest, digest v1.Hash, dir string, opts []remote.Option) error {
	img, err := u.image(ref, opts)
	if err != nil {
		return err
	}
	layers, err := u.layers(img)
	if err != nil {
		return err
	}
	u.sweep.Do(func() {
		_ = os.RemoveAll(u.tmpDir())
		// Trees of the layout before repositories were part of the key.
		_ = os.RemoveAll(filepath.Join(u.cfg.BaseDir, "images", "sha256"))
	})
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
		if err := extractLayer(ctx, layer, tree); err != nil {
			_ = os.RemoveAll(tmp)
			return fmt.Errorf("layer %d: %w", i, err)
		}
	}
	if err := tree.Seal(); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	return commit(tmp, dir)
}

// image fetches ref's manifest; an index is resolved to its image for this
// platform.
func (u *Unpacker) image(ref name.Digest, opts []remote.Option) (v1.Image, error) {
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return nil, err
	}
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, err
		}
		manifest, err := idx.IndexManifest()
		if err != nil {
			return nil, unpack.Terminal(fmt.Errorf("reading image index: %w", err))
		}
		child, err := choosePlatform(manifest)
		if err != nil {
			return nil, err
		}
		if desc, err = remote.Get(ref.Context().Digest(child.Digest.String()), opts...); err != nil {
			return nil, err
		}
		if desc.MediaType.IsIndex() {
			return nil, unpack.Terminal(fmt.Errorf("the image index's entry for %s is another index", platformString(child.Platform)))
		}
	}
	return desc.Image()
}

// layers checks the manifest against the limits before any layer is
// fetched: the layer count, and the sizes the layers declare (each
// layer's download is then held to its declared size).
func (u *Unpacker) layers(img v1.Image) ([]v1.Layer, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, unpack.Terminal(fmt.Errorf("reading image manifest: %w", err))
	}
	limits := u.cfg.Limits
	if len(m.Layers) > limits.MaxLayers {
		return nil, unpack.Terminal(fmt.Errorf("the image has %d layers, more than the limit of %d", len(m.Layers), limits.MaxLayers))
	}
	descs := m.Layers
	if m.Config.MediaType == helmConfigMediaType {
		chart, err := helmChartLayer(m.Layers)
		if err != nil {
			return nil, err
		}
		descs = []v1.Descriptor{chart}
	}
	var total int64
	for i, l := range descs {
		if l.Size < 0 {
			return nil, unpack.Terminal(fmt.Errorf("layer %d declares a negative size", i))
		}
		if total += l.Size; total > limits.MaxFetchBytes {
			return nil, unpack.Terminal(fmt.Errorf("the image's layers declare more than the fetch limit of %d bytes", limits.MaxFetchBytes))
		}
	}
	if len(descs) != len(m.Layers) {
		l, err := img.LayerByDigest(descs[0].Digest)
		if err != nil {
			return nil, err
		}
		return []v1.Layer{l}, nil
	}
	return img.Layers()
}

// Media types of Helm's OCI chart artifacts, as `helm push` writes them
// (helm.sh/helm/v3/pkg/registry: ConfigMediaType, ChartLayerMediaType,
// LegacyChartLayerMediaType). The chart layer is the chart's .tgz, which
// extracts like any layer: the chart's directory at the root.
const (
	helmConfigMediaType      = "application/vnd.cncf.helm.config.v1+json"
	helmChartLayerMediaType  = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
	helmLegacyChartMediaType = "application/tar+gzip"
)

// helmChartLayer picks the chart layer of a Helm chart artifact, as `helm
// pull` does: the other layers (a provenance file) are no tar archives and
// are not content.
func helmChartLayer(layers []v1.Descriptor) (v1.Descriptor, error) {
	var charts []v1.Descriptor
	for _, l := range layers {
		if l.MediaType == helmChartLayerMediaType || l.MediaType == helmLegacyChartMediaType {
			charts = append(charts, l)
		}
	}
	if len(charts) != 1 {
		return v1.Descriptor{}, unpack.Terminal(fmt.Errorf("the Helm chart artifact has %d layers of media type %s, want one", len(charts), helmChartLayerMediaType))
	}
	return charts[0], nil
}

// extractLayer streams one compressed layer into tree (archive.Extract
// decompresses gzip and zstd with bounded memory) and reads it to the end,
// which is where go-containerregistry verifies the blob's digest, and which
// the layer's declared size bounds.
func extractLayer(ctx context.Context, layer v1.Layer, tree *unpack.Tree) error {
	rc, err := layer.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := archive.Extract(ctx, rc, tree, archive.Options{Whiteouts: true}); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return fmt.Errorf("reading layer: %w", err)
	}
	return nil
}
