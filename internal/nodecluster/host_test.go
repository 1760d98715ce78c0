package nodecluster

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestHostStateDiff(t *testing.T) {
	before := HostState{
		Links:    []string{"lo", "eth0"},
		Iptables: []string{"iptables-save -A INPUT -j ACCEPT"},
		Mounts:   []string{"/", "/proc"},
		Sysctls:  map[string]string{"net/ipv4/ip_forward": "0", "kernel/panic": "0"},
	}
	if d := before.Diff(before); len(d) != 0 {
		t.Fatalf("a state differs from itself: %v", d)
	}
	after := HostState{
		Links:   []string{"eth0", "lo", "cni0"},
		Netns:   []string{"cni-1234"},
		Mounts:  []string{"/proc", "/"},
		Cgroups: []string{"memory/kubepods"},
		Paths:   []string{"/var/lib/kubelet"},
		Sysctls: map[string]string{"net/ipv4/ip_forward": "1", "kernel/panic": "0", "vm/overcommit_memory": "1"},
	}
	want := []string{
		"link added: cni0",
		"netns added: cni-1234",
		"iptables removed: iptables-save -A INPUT -j ACCEPT",
		"cgroup added: memory/kubepods",
		"path added: /var/lib/kubelet",
		`sysctl net/ipv4/ip_forward: "1", was "0"`,
		`sysctl vm/overcommit_memory: "1", was ""`,
	}
	if got := before.Diff(after); !reflect.DeepEqual(got, want) {
		t.Fatalf("Diff:\n got %q\nwant %q", got, want)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/a/b`:         "/a/b",
		`/a\040b`:      "/a b",
		`/x\011y\134z`: "/x\ty\\z",
		`/trailing\04`: `/trailing\04`,
		`/not\9octal`:  `/not\9octal`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRemoveEmptyDirsKeepsOthersFiles(t *testing.T) {
	root := filepath.Join(t.TempDir(), "containerd")
	for _, d := range []string{"s", "fifo", "runc/k8s.io", "runc/other"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// Another containerd's socket: it and the directories above it stay.
	if err := os.WriteFile(filepath.Join(root, "runc/other/state"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	removeEmptyDirs(root)
	for p, want := range map[string]bool{
		"":                 true,
		"runc/other":       true,
		"runc/other/state": true,
		"s":                false,
		"fifo":             false,
		"runc/k8s.io":      false,
	} {
		_, err := os.Stat(filepath.Join(root, p))
		if got := err == nil; got != want {
			t.Errorf("%s exists: %v, want %v", p, got, want)
		}
	}
	if err := os.Remove(filepath.Join(root, "runc/other/state")); err != nil {
		t.Fatal(err)
	}
	removeEmptyDirs(root)
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("empty tree not removed: %v", err)
	}
}

func TestEmptyTable(t *testing.T) {
	empty := []string{"iptables-save *filter", "iptables-save :INPUT ACCEPT", "iptables-save :FORWARD ACCEPT", "iptables-save COMMIT"}
	if !emptyTable(empty) {
		t.Error("a table of built-in ACCEPT chains with no rules is empty")
	}
	for _, extra := range []string{"iptables-save :KUBE-FORWARD -", "iptables-save -A INPUT -j DROP", "iptables-save :FORWARD DROP"} {
		if emptyTable(append(append([]string{}, empty[:3]...), extra, "iptables-save COMMIT")) {
			t.Errorf("table with %q is not empty", extra)
		}
	}
}
