// Command crashloop is the test operator image whose pods never become
// Ready: it logs why, writes the reason to /dev/termination-log (the
// container's terminationMessagePath, best effort), waits $CRASH_AFTER (a
// Go duration, default 1s) and exits with $EXIT_CODE (default 1), so
// kubelet restarts it into CrashLoopBackOff. Built by internal/nodeimages.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// TerminationLog is kubelet's default terminationMessagePath.
const TerminationLog = "/dev/termination-log"

func main() {
	after, code := time.Second, 1
	if v := os.Getenv("CRASH_AFTER"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintf(os.Stderr, "crashloop: CRASH_AFTER: %v\n", err)
			os.Exit(2)
		}
		after = d
	}
	if v := os.Getenv("EXIT_CODE"); v != "" {
		c, err := strconv.Atoi(v)
		if err != nil || c < 1 || c > 255 {
			fmt.Fprintf(os.Stderr, "crashloop: EXIT_CODE %q: want 1-255\n", v)
			os.Exit(2)
		}
		code = c
	}
	msg := fmt.Sprintf("crashloop: failing on purpose with exit code %d after %v", code, after)
	fmt.Fprintln(os.Stderr, msg)
	time.Sleep(after)
	_ = os.WriteFile(TerminationLog, []byte(msg+"\n"), 0o644)
	os.Exit(code)
}
