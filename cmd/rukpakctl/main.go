// Command rukpakctl is the RukPak command-line tool. Its render command shows
// what a bundle would install, running the same validation and conversion as
// the provisioners.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd(os.Stdout).Execute(); err != nil {
		// The bare message, as a Bundle's status condition would carry it.
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
