package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"

	"github.com/google/go-containerregistry/pkg/name"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/image"
)

// imageOptions reach a registry the way a Bundle's image source does.
type imageOptions struct {
	caFile   string
	insecure bool
}

// isImageRef reports whether arg names an image rather than a local path:
// it does not exist on disk and parses as a reference with a registry or
// repository path.
func isImageRef(arg string) bool {
	if _, err := os.Stat(arg); err == nil {
		return false
	}
	_, err := name.ParseReference(arg, name.StrictValidation)
	if err != nil {
		_, err = name.ParseReference(arg)
	}
	return err == nil
}

// pullBundle unpacks an image with the provisioner's own image unpacker (the
// same digest resolution, layer flattening and safety limits) into a
// temporary directory; cleanup removes it.
func pullBundle(ctx context.Context, ref string, o imageOptions, limits unpack.Limits) (fs.FS, func(), error) {
	dir, err := os.MkdirTemp("", "rukpakctl-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	src := &rukpakv1alpha1.ImageSource{Ref: ref, InsecureSkipTLSVerify: o.insecure}
	if o.caFile != "" {
		ca, err := os.ReadFile(o.caFile)
		if err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("reading --ca-file: %w", err)
		}
		src.CertificateData = string(ca)
	}
	b := &rukpakv1alpha1.Bundle{Spec: rukpakv1alpha1.BundleSpec{Source: rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: src}}}
	res, err := image.New(unpack.Config{BaseDir: dir, Limits: limits}).Unpack(ctx, b)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return res.FS, func() { _ = res.Close(); cleanup() }, nil
}
