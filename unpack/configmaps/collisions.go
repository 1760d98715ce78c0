package configmaps

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/rukpak-dev/rukpak/unpack"
)

// collisions fails when two ConfigMaps would write the same file, or when
// one's file is where another needs a directory: the result would depend on
// the order of the list, silently. ConfigMaps are added one at a time, so
// only names are kept, never contents.
type collisions struct {
	files   map[string]string // file -> ConfigMap writing it
	parents map[string]string // directory -> first ConfigMap needing it
}

func newCollisions() *collisions {
	return &collisions{files: map[string]string{}, parents: map[string]string{}}
}

// add records the files cm writes under dir, or fails naming the clash.
func (c *collisions) add(cm *corev1.ConfigMap, dir string) error {
	for _, key := range fileKeys(cm) {
		// The API server allows only [-._a-zA-Z0-9]+ keys; check anyway,
		// the Tree would otherwise see a path of another directory.
		if key == "" || key == "." || key == ".." || strings.ContainsAny(key, "/\\") {
			return unpack.Terminal(fmt.Errorf("ConfigMap %s: key %q is not a valid file name", cm.Name, key))
		}
		name := path.Join(dir, key)
		if other, ok := c.files[name]; ok {
			return unpack.Terminal(collision(other, cm.Name, name))
		}
		if other, ok := c.parents[name]; ok {
			return unpack.Terminal(fmt.Errorf("ConfigMaps %s and %s collide: %s is a file of %s and a directory of %s", other, cm.Name, name, cm.Name, other))
		}
		c.files[name] = cm.Name
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if other, ok := c.files[d]; ok {
				return unpack.Terminal(fmt.Errorf("ConfigMaps %s and %s collide: %s is a file of %s and a directory of %s", other, cm.Name, d, other, cm.Name))
			}
			if _, ok := c.parents[d]; !ok {
				c.parents[d] = cm.Name
			}
		}
	}
	return nil
}

func collision(first, second, file string) error {
	if first == second {
		return fmt.Errorf("ConfigMap %s writes file %s twice", first, file)
	}
	return fmt.Errorf("ConfigMaps %s and %s both write file %s", first, second, file)
}

// fileKeys are the keys of data and binaryData; a key in both (which the
// API server rejects) shows up twice and is caught as a collision.
func fileKeys(cm *corev1.ConfigMap) []string {
	return append(sortedKeys(cm.Data), sortedKeys(cm.BinaryData)...)
}
