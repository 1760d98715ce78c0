package main

import (
	"context"
	"flag"
	"io/fs"

	"github.com/spf13/cobra"

	"github.com/rukpak-dev/rukpak/unpack"
)

// bindSourceFlags binds the flags saying how openSource reaches and
// unpacks a bundle (render's, rbac's and diff's alike).
func bindSourceFlags(cmd *cobra.Command, image *imageOptions, limits *unpack.Limits) {
	cmd.Flags().StringVar(&image.caFile, "ca-file", "", "IMAGE: PEM CA certificates trusted for the registry, besides the system's")
	cmd.Flags().BoolVar(&image.insecure, "insecure-skip-tls-verify", false, "IMAGE: do not verify the registry's certificate")
	// The provisioner's limit flags, with its defaults: a bundle opens here
	// exactly when a provisioner with the same flags would unpack it.
	set := flag.NewFlagSet("limits", flag.ContinueOnError)
	limits.BindFlags(set)
	cmd.Flags().AddGoFlagSet(set)
}

// openSource opens a command's bundle argument: a chart archive, a bundle
// image reference, or a directory (a bundle or an OCI image layout).
// Unless it fails, the returned close releases what was unpacked.
func openSource(ctx context.Context, arg string, image imageOptions, limits unpack.Limits) (fs.FS, func(), error) {
	switch {
	case isChartArchive(arg):
		fsys, err := openChartArchive(arg, limits)
		if err != nil {
			return nil, nil, err
		}
		return fsys, func() {}, nil
	case isImageRef(arg):
		return pullBundle(ctx, arg, image, limits)
	default:
		b, err := openBundle(ctx, arg, limits)
		if err != nil {
			return nil, nil, err
		}
		return b, b.close, nil
	}
}
