package nodecluster

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestParseEphemeralLow(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"32768\t60999\n", 32768},
		{"49152 65535", 49152},
		{"", defaultEphemeralLo},
		{"x 60999", defaultEphemeralLo},
		{"1024 60999", defaultEphemeralLo}, // leaves nothing below it to choose from
		{"70000 80000", defaultEphemeralLo},
	} {
		if got := parseEphemeralLow(tc.in); got != tc.want {
			t.Errorf("parseEphemeralLow(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestFreePortsBelowEphemeralRange(t *testing.T) {
	ports, err := freePorts(9)
	if err != nil {
		t.Fatal(err)
	}
	lo := ephemeralLow()
	seen := map[int]bool{}
	for _, p := range ports {
		if p < lowestPort || p >= lo {
			t.Errorf("port %d outside [%d, %d)", p, lowestPort, lo)
		}
		if seen[p] {
			t.Errorf("port %d returned twice", p)
		}
		seen[p] = true
	}
}

func TestBindableSeesAListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := l.Addr().(*net.TCPAddr).Port
	if bindable(p) {
		t.Errorf("port %d has a listener on 127.0.0.1, yet bindable says a 0.0.0.0 listener can take it", p)
	}
}

func TestCgroupGone(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&os.PathError{Op: "open", Path: "/sys/fs/cgroup/memory/x/cgroup.procs", Err: syscall.ENOENT}, true},
		{&os.PathError{Op: "read", Path: "/sys/fs/cgroup/memory/x/cgroup.procs", Err: syscall.ENODEV}, true},
		{&os.PathError{Op: "open", Path: "/sys/fs/cgroup/memory/x/cgroup.procs", Err: syscall.EACCES}, false},
		{errors.New("other"), false},
	} {
		if got := cgroupGone(tc.err); got != tc.want {
			t.Errorf("cgroupGone(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
