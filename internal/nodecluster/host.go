package nodecluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// HostSysctls are the sysctls a node cluster may change (kubelet sets the
// first three; the CNI bridge needs forwarding and bridge-nf-call). A
// HostState records their values so teardown can prove they are restored.
var HostSysctls = []string{
	"vm/overcommit_memory",
	"kernel/panic",
	"kernel/panic_on_oops",
	"net/ipv4/ip_forward",
	"net/ipv6/conf/all/forwarding",
	"net/bridge/bridge-nf-call-iptables",
	"net/bridge/bridge-nf-call-ip6tables",
	"net/netfilter/nf_conntrack_max",
}

// HostState is what a node cluster could leave behind on the host: network
// links, network namespaces, iptables rules, mount points and sysctls.
type HostState struct {
	Links    []string
	Netns    []string
	Iptables []string
	Mounts   []string
	Cgroups  []string
	Paths    []string
	Sysctls  map[string]string
}

// HostPaths are the well-known paths a container runtime or kubelet creates
// whatever its configuration says; HostState records which of them exist.
var HostPaths = []string{
	"/run/containerd",
	"/var/lib/containerd",
	"/opt/containerd",
	"/etc/cni/net.d",
	"/var/lib/cni",
	"/run/netns",
	"/var/lib/kubelet",
	"/var/run/kubernetes",
	"/var/log/pods",
	"/var/log/containers",
}

// SnapshotHost records the host's state. Fields that cannot be read (no
// iptables installed, a sysctl the kernel lacks) are left empty, the same
// way before and after.
func SnapshotHost(ctx context.Context) (HostState, error) {
	var s HostState
	var err error
	if s.Links, err = linkNames(); err != nil {
		return s, err
	}
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			s.Netns = append(s.Netns, e.Name())
		}
	}
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		out, err := runTool(ctx, tool)
		if err != nil {
			continue
		}
		var table []string
		for _, line := range strings.Split(out, "\n") {
			// Comments carry timestamps; chain lines carry counters.
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if strings.HasPrefix(line, ":") {
				if i := strings.Index(line, " ["); i > 0 {
					line = line[:i]
				}
			}
			table = append(table, tool+" "+line)
			if line == "COMMIT" {
				if !emptyTable(table) {
					s.Iptables = append(s.Iptables, table...)
				}
				table = nil
			}
		}
		s.Iptables = append(s.Iptables, table...)
	}
	if s.Mounts, err = mountPoints(); err != nil {
		return s, err
	}
	sort.Strings(s.Mounts)
	s.Cgroups = cgroupDirs()
	for _, p := range HostPaths {
		if _, err := os.Lstat(p); err == nil {
			s.Paths = append(s.Paths, p)
		}
	}
	s.Sysctls = map[string]string{}
	for _, k := range HostSysctls {
		if v, err := os.ReadFile("/proc/sys/" + k); err == nil {
			s.Sysctls[k] = strings.TrimSpace(string(v))
		}
	}
	return s, nil
}

// emptyTable reports whether an iptables-save table (its lines, tool
// prefixed) has no rules and only built-in chains with an ACCEPT policy:
// the same as no table. With the nf_tables backend iptables cannot delete
// a table once a tool created it (that needs nft).
func emptyTable(lines []string) bool {
	for _, l := range lines {
		_, l, _ = strings.Cut(l, " ")
		if strings.HasPrefix(l, "-A ") || (strings.HasPrefix(l, ":") && !strings.HasSuffix(l, " ACCEPT")) {
			return false
		}
	}
	return true
}

// Diff describes how after differs from s, one line per difference; empty
// when the host is as it was.
func (s HostState) Diff(after HostState) []string {
	var d []string
	d = append(d, diffLists("link", s.Links, after.Links)...)
	d = append(d, diffLists("netns", s.Netns, after.Netns)...)
	d = append(d, diffLists("iptables", s.Iptables, after.Iptables)...)
	d = append(d, diffLists("mount", s.Mounts, after.Mounts)...)
	d = append(d, diffLists("cgroup", s.Cgroups, after.Cgroups)...)
	d = append(d, diffLists("path", s.Paths, after.Paths)...)
	keys := make([]string, 0, len(s.Sysctls)+len(after.Sysctls))
	seen := map[string]bool{}
	for k := range s.Sysctls {
		keys, seen[k] = append(keys, k), true
	}
	for k := range after.Sysctls {
		if !seen[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if s.Sysctls[k] != after.Sysctls[k] {
			d = append(d, fmt.Sprintf("sysctl %s: %q, was %q", k, after.Sysctls[k], s.Sysctls[k]))
		}
	}
	return d
}

func diffLists(kind string, before, after []string) []string {
	count := map[string]int{}
	for _, x := range before {
		count[x]++
	}
	for _, x := range after {
		count[x]--
	}
	var d []string
	for x, n := range count {
		switch {
		case n < 0:
			d = append(d, fmt.Sprintf("%s added: %s", kind, x))
		case n > 0:
			d = append(d, fmt.Sprintf("%s removed: %s", kind, x))
		}
	}
	sort.Strings(d)
	return d
}

func linkNames() ([]string, error) {
	ents, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out, nil
}

func runTool(ctx context.Context, name string, args ...string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		for _, d := range []string{"/usr/sbin", "/sbin"} {
			if _, serr := os.Stat(d + "/" + name); serr == nil {
				path, err = d+"/"+name, nil
				break
			}
		}
		if err != nil {
			return "", err
		}
	}
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w: %s", name, err, stderr.String())
	}
	return out.String(), nil
}

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupDirs lists the cgroups two levels deep under every hierarchy
// (cgroup v1: <controller>/<a>/<b>; v2: <a>/<b>), where containerd (/k8s.io,
// /<namespace>) and kubelet (/kubepods) put theirs.
func cgroupDirs() []string {
	var out []string
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			p := filepath.Join(dir, e.Name())
			rel, _ := filepath.Rel(cgroupRoot, p)
			if clusterCgroup(rel) {
				out = append(out, rel)
			}
			if depth > 1 {
				walk(p, depth-1)
			}
		}
	}
	walk(cgroupRoot, 3)
	sort.Strings(out)
	return out
}

// clusterCgroups name the cgroups a node cluster creates (the kubelet's
// kubepods, containerd's k8s.io namespace): only they are compared, as
// other programs on the host create and remove cgroups of their own at
// any time.
var clusterCgroups = []string{"kubepods", "k8s.io"}

func clusterCgroup(rel string) bool {
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if contains(clusterCgroups, part) {
			return true
		}
	}
	return false
}

// RemoveCgroups kills every process in the cgroup named name (e.g. "k8s.io"
// or "kubepods") and its children, in every hierarchy, then removes those
// cgroups.
func RemoveCgroups(name string) error {
	name = filepath.Clean("/" + name)
	if name == "/" {
		return fmt.Errorf("refusing to remove the root cgroup")
	}
	var roots []string
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		roots = []string{cgroupRoot} // v2: one unified hierarchy
	} else {
		ents, err := os.ReadDir(cgroupRoot)
		if err != nil {
			return err
		}
		for _, e := range ents {
			// Symlinks such as cpu -> cpu,cpuacct are the same hierarchy.
			if e.IsDir() && e.Type()&os.ModeSymlink == 0 {
				roots = append(roots, filepath.Join(cgroupRoot, e.Name()))
			}
		}
	}
	var errs []error
	for _, r := range roots {
		top := filepath.Join(r, name)
		if _, err := os.Stat(top); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		// Deepest first: a cgroup with children cannot be removed.
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, p := range dirs {
			if err := killCgroup(p); err != nil {
				errs = append(errs, err)
				continue
			}
			if err := syscall.Rmdir(p); err != nil && !os.IsNotExist(err) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

// cgroupGone reports an error reading a cgroup's files that means it was
// removed, so it is empty: ENOENT, or ENODEV when it went between our walk
// and the read (runc and the kubelet remove their pods' cgroups as they
// stop; CI saw it).
func cgroupGone(err error) bool {
	return os.IsNotExist(err) || errors.Is(err, syscall.ENODEV)
}

// killCgroup SIGKILLs the processes of one cgroup directory until it is
// empty (10 s at most).
func killCgroup(dir string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		raw, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			if cgroupGone(err) {
				return nil
			}
			return err
		}
		pids := strings.Fields(string(raw))
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s still has processes %v", dir, pids)
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil && pid > 1 && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}
