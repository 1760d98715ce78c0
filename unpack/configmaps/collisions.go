package configmaps

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/rukpak-dev/rukpak/unpack"
)

// checkCollisions fails when two ConfigMaps would write the same file, or
// when one's file is where another needs a directory: the result would
// depend on the order of the list, silently.
func checkCollisions(maps []*corev1.ConfigMap, dirs []string) error {
	files := map[string]string{}   // file -> ConfigMap writing it
	parents := map[string]string{} // directory -> first ConfigMap needing it
	for i, cm := range maps {
		for _, key := range fileKeys(cm) {
			// The API server allows only [-._a-zA-Z0-9]+ keys; check anyway,
			// the Tree would otherwise see a path of another directory.
			if key == "" || key == "." || key == ".." || strings.ContainsAny(key, "/\\") {
				return unpack.Terminal(fmt.Errorf("ConfigMap %s: key %q is not a valid file name", cm.Name, key))
			}
			name := path.Join(dirs[i], key)
			if other, ok := files[name]; ok {
				return unpack.Terminal(collision(other, cm.Name, name))
			}
			if other, ok := parents[name]; ok {
				return unpack.Terminal(fmt.Errorf("ConfigMaps %s and %s collide: %s is a file of %s and a directory of %s", other, cm.Name, name, cm.Name, other))
			}
			files[name] = cm.Name
			for d := path.Dir(name); d != "."; d = path.Dir(d) {
				if other, ok := files[d]; ok {
					return unpack.Terminal(fmt.Errorf("ConfigMaps %s and %s collide: %s is a file of %s and a directory of %s", other, cm.Name, d, other, cm.Name))
				}
				if _, ok := parents[d]; !ok {
					parents[d] = cm.Name
				}
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
