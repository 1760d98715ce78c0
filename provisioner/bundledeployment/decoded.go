package bundledeployment

import (
	"context"
	"io/fs"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/memo"
	"github.com/rukpak-dev/rukpak/provisioner/metrics"
	"github.com/rukpak-dev/rukpak/storage"
)

// decode returns b's content and the objects Objects finds in it for bd.
// With an ObjectCache and a Loader that hashes what it loads, objects
// decoded before from the same archive bytes (as this process stores
// them), ObjectsName and spec.config come from the cache: nothing is loaded or
// decoded, and fsys loads the content only if something opens it.
// loadErr says the content could not be loaded (a retry may succeed);
// objErr that the content or config is invalid (nothing to retry).
func (r *Reconciler) decode(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, b *rukpakv1alpha1.Bundle) (fsys fs.FS, objs []*unstructured.Unstructured, loadErr, objErr error) {
	hl, hashing := r.Loader.(storage.HashingLoader)
	cached := hashing && r.ObjectCache != nil && r.Objects != nil
	key := memo.Key{Decoder: r.ObjectsName}
	if key.Decoder == "" {
		key.Decoder = r.Class
	}
	if cached {
		var raw []byte
		if bd.Spec.Config != nil {
			raw = bd.Spec.Config.Raw
		}
		key.Config = memo.ConfigKey(raw)
		if sum, ok := hl.StoredHash(ctx, b); ok {
			key.Content = sum
			if objs, ok := r.ObjectCache.Get(key); ok {
				metrics.Step(metrics.StepCached)
				return &lazyFS{load: func() (fs.FS, error) { return r.load(ctx, b) }}, objs, nil, nil
			}
		}
	}
	metrics.Step(metrics.StepLoad)
	var (
		sum  [32]byte
		kept bool
		err  error
	)
	if hashing {
		// Without a config, objects are decoded from the converted
		// manifests alone: the source's are not even kept.
		keep := storage.InstallContent
		if r.Objects != nil && (bd.Spec.Config == nil || len(bd.Spec.Config.Raw) == 0) {
			keep = storage.InstallContentWithoutSource
		}
		fsys, sum, kept, err = hl.LoadHashed(ctx, b, keep)
	} else {
		fsys, err = r.Loader.Load(ctx, b)
	}
	if err != nil {
		return nil, nil, err, nil
	}
	if r.Objects == nil {
		return fsys, nil, nil, nil
	}
	metrics.Step(metrics.StepDecode)
	if objs, err = r.Objects(ctx, fsys, bd); err != nil {
		return fsys, nil, nil, err
	}
	if cached && kept {
		// Keyed by the bytes just decoded, whatever StoredHash said.
		key.Content = sum
		r.ObjectCache.Add(key, objs)
	}
	return fsys, objs, nil, nil
}

// load reads b's content, counted as a load.
func (r *Reconciler) load(ctx context.Context, b *rukpakv1alpha1.Bundle) (fs.FS, error) {
	metrics.Step(metrics.StepLoad)
	return r.Loader.Load(ctx, b)
}

// lazyFS is content loaded when first opened: after a cache hit only an
// install that reads files (or an error message naming dependencies) pays
// for the load.
type lazyFS struct {
	load func() (fs.FS, error)

	once sync.Once
	fsys fs.FS
	err  error
}

func (l *lazyFS) Open(name string) (fs.File, error) {
	l.once.Do(func() { l.fsys, l.err = l.load() })
	if l.err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: l.err}
	}
	return l.fsys.Open(name)
}
