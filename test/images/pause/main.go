// Command pause is the sandbox ("pause") container of the real-node test
// cluster: it holds a pod's namespaces and sleeps until SIGTERM or SIGINT.
// As PID 1 of a pod sharing its process namespace it also reaps orphaned
// children. It is built as a static binary by internal/nodeimages, because
// no image can be pulled on the offline test machine.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-v" || os.Args[1] == "--version") {
		fmt.Println("rukpak-test pause 1")
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			fmt.Fprintf(os.Stderr, "pause: %v: exiting\n", s)
			return
		}
		reap()
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
