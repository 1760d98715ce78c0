package testregistry

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// PullLayers writes each layer of img, still compressed, to a file in dir:
// the least work any image unpack can do, and so the floor benchmarks
// compare against.
func PullLayers(img v1.Image, dir string) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for i, l := range layers {
		if err := copyLayer(l, filepath.Join(dir, fmt.Sprintf("layer-%d", i))); err != nil {
			return err
		}
	}
	return nil
}

func copyLayer(l v1.Layer, path string) error {
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, rc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
