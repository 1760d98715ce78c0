// Package memlimit sets the Go runtime's soft memory limit (GOMEMLIMIT)
// from the container's memory limit, leaving room for what the runtime
// does not count.
//
// A container's memory limit (its cgroup's memory.max) charges everything
// the process has resident: the Go runtime's memory, which GOMEMLIMIT
// bounds, and also the pages of the executable it runs from, which it does
// not (the provisioner's binary is ~100 MB, ~85 MiB of it resident once
// every controller has run). Setting GOMEMLIMIT to the container's limit
// itself, as a resourceFieldRef can, lets the heap grow into the room those
// pages need: the kernel then evicts and re-reads the binary, or kills the
// process. The limit set here keeps the whole process within three
// quarters of the container's limit: the container's limit less a quarter
// of it (at most 512 MiB: a large container needs no more headroom than a
// small one's), the size of the executable and a margin, and leaves at
// least half of the limit to the runtime. The quarter is room for what a soft
// limit cannot hold back: a burst of allocation between two collections
// (a reconcile decoding a bundle of large CRDs), and a live heap that
// outgrows the limit, which the runtime then lets through rather than
// collect without end. The cost is collections that come sooner when the
// live heap is large: measured at 10,000 BundleDeployments in
// docs/benchmarks.md.
package memlimit

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
)

// EnvContainerLimit names the environment variable holding the
// container's memory limit in bytes (a resourceFieldRef to limits.memory).
const EnvContainerLimit = "RUKPAK_MEMORY_LIMIT"

// margin is room for the runtime's own overshoot and anything else
// resident (thread stacks outside the heap, the vDSO, libc's few pages).
const margin = 16 << 20

// maxHeadroom bounds the quarter of the limit left for bursts.
const maxHeadroom = 512 << 20

// For returns the Go memory limit for a container limit of limit bytes and
// an executable of exe bytes.
func For(limit, exe int64) int64 {
	reserve := min(limit/4, maxHeadroom) + exe + margin
	reserve = min(reserve, limit/2)
	return limit - reserve
}

// ExecutableSize is the size of the running executable, 0 if unknown.
func ExecutableSize() int64 {
	p, err := os.Executable()
	if err != nil {
		return 0
	}
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// Set sets the runtime's memory limit from EnvContainerLimit unless
// GOMEMLIMIT is set (an explicit setting wins), and says what it did ("" if
// nothing).
func Set() (string, error) {
	v := os.Getenv(EnvContainerLimit)
	switch {
	case v == "":
		return "", nil
	case os.Getenv("GOMEMLIMIT") != "":
		return fmt.Sprintf("GOMEMLIMIT=%s is set: %s=%s left unused", os.Getenv("GOMEMLIMIT"), EnvContainerLimit, v), nil
	}
	limit, err := strconv.ParseInt(v, 10, 64)
	if err != nil || limit <= 0 {
		return "", fmt.Errorf("%s=%q: not a number of bytes", EnvContainerLimit, v)
	}
	exe := ExecutableSize()
	set := For(limit, exe)
	debug.SetMemoryLimit(set)
	return fmt.Sprintf("Go memory limit %d bytes (%d MiB): the container's %d MiB less a quarter of it (at most 512 MiB), the executable's %d MiB and a margin", set, set>>20, limit>>20, exe>>20), nil
}
