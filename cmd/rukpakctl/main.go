// Command rukpakctl is the RukPak command-line tool. Its render command shows
// what a bundle would install, running the same validation and conversion as
// the provisioners.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := newRootCmd(os.Stdout).ExecuteContext(ctx)
	stop()
	if err != nil {
		// The bare message, as a Bundle's status condition would carry it.
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
