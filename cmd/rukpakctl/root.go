package main

import (
	"io"

	"github.com/spf13/cobra"
)

func newRootCmd(out io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "rukpakctl",
		Short:         "Work with RukPak bundles",
		SilenceErrors: true, // main prints the error once
		SilenceUsage:  true, // a bad bundle is not a usage error
	}
	root.SetOut(out)
	root.AddCommand(newRenderCmd())
	root.AddCommand(newRBACCmd())
	root.AddCommand(newDiffCmd())
	root.AddCommand(newContentCmd())
	root.AddCommand(newRunCmd())
	root.AddCommand(newCatalogCmd())
	return root
}
