// Package configmaps unpacks Bundles whose source is a list of ConfigMaps:
// every data and binaryData key of each ConfigMap becomes a file under the
// ConfigMap's path.
//
// A ConfigMap that does not exist yet gives a Pending result naming it
// rather than an error: it is usually created alongside the Bundle (or was
// misspelt), so the controller reports it, in RukPak's words, and retries
// (and watches ConfigMaps).
//
// Every ConfigMap must be immutable (immutable: true): a Bundle's content
// never changes. The resolved source is the source with each ConfigMap's
// content digest recorded, and an unpack from a source that carries digests
// (a re-unpack from status.resolvedSource, or a spec that pins them) fails
// unless the content still matches: an immutable ConfigMap can still be
// deleted and created again with other content.
//
// Memory: ConfigMaps are read one at a time, written to the tree and
// dropped; only file names are kept across them.
package configmaps

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
)

// Unpacker unpacks configMaps sources.
type Unpacker struct {
	cfg unpack.Config
}

var _ unpack.Unpacker = (*Unpacker)(nil)

// New returns an Unpacker that reads ConfigMaps in cfg.Namespace with
// cfg.Reader and writes trees under cfg.BaseDir.
func New(cfg unpack.Config) unpack.Unpacker {
	return &Unpacker{cfg: cfg}
}

// maxConfigMaps bounds the list of one source: each entry costs a request
// to the API server, and real bundles need a handful.
const maxConfigMaps = 1000

// Unpack writes the files of every listed ConfigMap into a new tree.
func (u *Unpacker) Unpack(ctx context.Context, bundle *rukpakv1alpha1.Bundle) (*unpack.Result, error) {
	src := unpack.FetchSource(bundle)
	if len(src.ConfigMaps) == 0 {
		return nil, unpack.Terminal(errors.New("source.configMaps is empty"))
	}
	if n := len(src.ConfigMaps); n > maxConfigMaps {
		return nil, unpack.Terminal(fmt.Errorf("source.configMaps lists %d ConfigMaps, more than the limit of %d", n, maxConfigMaps))
	}

	// Check the whole list before fetching anything.
	dirs := make([]string, len(src.ConfigMaps))
	for i, s := range src.ConfigMaps {
		dir, err := unpack.CleanName(s.Path)
		if err != nil {
			return nil, unpack.Terminal(fmt.Errorf("invalid source.configMaps[%d].path %q: %w", i, s.Path, err))
		}
		dirs[i] = dir
		if s.ConfigMap.Name == "" {
			return nil, unpack.Terminal(fmt.Errorf("source.configMaps[%d].configMap.name is empty", i))
		}
	}

	tree, err := unpack.NewTempTree(u.cfg.BaseDir, "configmaps-"+bundle.Name+"-", u.cfg.Limits)
	if err != nil {
		return nil, err
	}
	resolved := src.DeepCopy()
	seen := newCollisions()
	for i := range src.ConfigMaps {
		res, digest, err := u.add(ctx, tree, seen, bundle, src, i, dirs[i])
		if err != nil || res != nil {
			_ = tree.Discard()
			return res, err
		}
		resolved.ConfigMaps[i].Digest = digest
	}
	return unpack.Unpacked(tree.FS(), resolved, tree.Discard), nil
}

// add fetches the i-th ConfigMap of src, checks it and writes its files
// under dir. It returns a Pending result if the ConfigMap does not exist
// yet, else the digest of its content.
func (u *Unpacker) add(ctx context.Context, tree *unpack.Tree, seen *collisions, bundle *rukpakv1alpha1.Bundle, src *rukpakv1alpha1.BundleSource, i int, dir string) (*unpack.Result, string, error) {
	s := src.ConfigMaps[i]
	key := client.ObjectKey{Namespace: u.cfg.Namespace, Name: s.ConfigMap.Name}
	cm := &corev1.ConfigMap{}
	if err := u.cfg.Reader.Get(ctx, key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			// RukPak v0.16's words, which users' checks match (the Bundle
			// reconciler begins them with "source bundle content: ", as RukPak's did).
			return unpack.Pending(fmt.Sprintf("get configmap %s: ConfigMap %q not found", key, key.Name)), "", nil
		}
		return nil, "", fmt.Errorf("getting ConfigMap %s: %w", key, err)
	}
	if cm.Immutable == nil || !*cm.Immutable {
		return nil, "", unpack.Terminal(fmt.Errorf("ConfigMap %s (source.configMaps[%d]) must be immutable (set immutable: true)", key, i))
	}
	if err := seen.add(cm, dir); err != nil {
		return nil, "", err
	}
	digest := Digest(cm)
	// The pin of the source fetched (the resolved source, when it is the
	// spec plus digests) and the spec's own, if it sets one.
	pins := []string{s.Digest}
	if spec := bundle.Spec.Source.ConfigMaps; i < len(spec) {
		pins = append(pins, spec[i].Digest)
	}
	for _, pin := range pins {
		if pin != "" && pin != digest {
			return nil, "", unpack.Terminal(fmt.Errorf("ConfigMap %s (source.configMaps[%d]) holds content %s, not the %s this Bundle pins", key, i, digest, pin))
		}
	}
	if err := writeConfigMap(tree, cm, dir); err != nil {
		return nil, "", fmt.Errorf("writing ConfigMap %s: %w", cm.Name, err)
	}
	return nil, digest, nil
}

// Digest is the content identity of cm recorded in
// ConfigMapSource.digest: sha256 over its files in key order, each as the
// key, NUL, the size in decimal, NUL, the content.
func Digest(cm *corev1.ConfigMap) string {
	keys := fileKeys(cm)
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		if v, ok := cm.Data[k]; ok {
			writeEntry(h, k, len(v), strings.NewReader(v))
		} else {
			v := cm.BinaryData[k]
			writeEntry(h, k, len(v), bytes.NewReader(v))
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func writeEntry(h hash.Hash, key string, size int, content io.Reader) {
	_, _ = io.WriteString(h, key+"\x00"+strconv.Itoa(size)+"\x00")
	_, _ = io.Copy(h, content) // hash writes never fail
}

func writeConfigMap(tree *unpack.Tree, cm *corev1.ConfigMap, dir string) error {
	for _, k := range sortedKeys(cm.Data) {
		if err := tree.WriteFile(path.Join(dir, k), strings.NewReader(cm.Data[k]), 0o644); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(cm.BinaryData) {
		if err := tree.WriteFile(path.Join(dir, k), bytes.NewReader(cm.BinaryData[k]), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// StripContent is a cache transform for ConfigMaps watched only to learn
// that one appeared or changed (the Bundle reconciler's watch): it drops
// data, binaryData and managed fields, so the informer holds names, not
// every ConfigMap's content. Unpacks read ConfigMaps from the API server.
func StripContent(obj any) (any, error) {
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		cm.Data, cm.BinaryData, cm.ManagedFields = nil, nil, nil
	}
	return obj, nil
}
