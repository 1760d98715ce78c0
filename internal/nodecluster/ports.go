package nodecluster

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// The components listen on ports chosen here and bound seconds later by
// another process (the kubelet's, after containerd and the image imports).
// A port from the kernel's ephemeral range can be taken in between by any
// outgoing connection on this busy host (CI saw the kubelet fail with
// "bind: address already in use"), so ports come from below that range,
// where only listeners that ask for a port by number live.
const (
	lowestPort         = 10000
	defaultEphemeralLo = 32768
)

// freePorts returns n distinct TCP ports, outside the ephemeral range, that
// nothing listens on (on any address) at the time of asking.
func freePorts(n int) ([]int, error) {
	hi := ephemeralLow() - 1
	if hi-lowestPort < 10*n {
		return nil, fmt.Errorf("ephemeral port range starts at %d: fewer than %d ports below it to choose from", hi+1, 10*n)
	}
	seen := map[int]bool{}
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries > 100*n {
			return nil, errors.New("no free ports below the ephemeral range")
		}
		p := lowestPort + rand.IntN(hi-lowestPort+1)
		if seen[p] {
			continue
		}
		seen[p] = true
		if bindable(p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// bindable reports whether a listener on every address can take port p:
// the API server and the kubelet bind 0.0.0.0.
func bindable(p int) bool {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return defaultEphemeralLo
	}
	return parseEphemeralLow(string(b))
}

func parseEphemeralLow(s string) int {
	f := strings.Fields(s)
	if len(f) != 2 {
		return defaultEphemeralLo
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= lowestPort || lo > 65535 {
		return defaultEphemeralLo
	}
	return lo
}
