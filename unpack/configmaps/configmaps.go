// Package configmaps unpacks Bundles whose source is a list of ConfigMaps:
// every data and binaryData key of each ConfigMap becomes a file under the
// ConfigMap's path.
//
// A ConfigMap that does not exist yet gives a Pending result naming it
// rather than an error: it is usually created alongside the Bundle, and the
// controller is expected to retry (and to watch ConfigMaps). The resolved
// source is the source itself: ConfigMap sources are expected to be
// immutable (immutable: true), and nothing finer than the name pins them.
package configmaps

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
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

// Unpack writes the files of every listed ConfigMap into a new tree.
func (u *Unpacker) Unpack(ctx context.Context, bundle *rukpakv1alpha1.Bundle) (*unpack.Result, error) {
	src := unpack.FetchSource(bundle)
	if len(src.ConfigMaps) == 0 {
		return nil, unpack.Terminal(errors.New("source.configMaps is empty"))
	}

	// Validate and fetch everything before writing anything.
	maps := make([]*corev1.ConfigMap, len(src.ConfigMaps))
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
		cm := &corev1.ConfigMap{}
		key := client.ObjectKey{Namespace: u.cfg.Namespace, Name: s.ConfigMap.Name}
		if err := u.cfg.Reader.Get(ctx, key, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return unpack.Pending(fmt.Sprintf("ConfigMap %s (source.configMaps[%d]) not found; waiting for it to be created", key, i)), nil
			}
			return nil, fmt.Errorf("getting ConfigMap %s: %w", key, err)
		}
		maps[i] = cm
	}
	if err := checkCollisions(maps, dirs); err != nil {
		return nil, err
	}

	tree, err := unpack.NewTempTree(u.cfg.BaseDir, "configmaps-"+bundle.Name+"-", u.cfg.Limits)
	if err != nil {
		return nil, err
	}
	for i, cm := range maps {
		if err := writeConfigMap(tree, cm, dirs[i]); err != nil {
			_ = tree.Discard()
			return nil, fmt.Errorf("writing ConfigMap %s: %w", cm.Name, err)
		}
	}
	return unpack.Unpacked(tree.FS(), src.DeepCopy(), tree.Discard), nil
}

func writeConfigMap(tree *unpack.Tree, cm *corev1.ConfigMap, dir string) error {
	for _, k := range sortedKeys(cm.Data) {
		if err := tree.WriteFile(path.Join(dir, k), strings.NewReader(cm.Data[k]), 0o644); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(cm.BinaryData) {
		if err := tree.WriteFile(path.Join(dir, k), strings.NewReader(string(cm.BinaryData[k])), 0o644); err != nil {
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
