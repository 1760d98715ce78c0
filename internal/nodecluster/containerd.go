// Package nodecluster runs the pieces of a real single-node Kubernetes
// cluster on this machine, started and stopped by PID (issue 12): a
// containerd with its own configuration, root, state and socket (nothing of
// a system containerd is used or touched), and Cluster: etcd, the control
// plane, that containerd with a CNI bridge, a kubelet and kube-proxy, torn
// down with the host restored.
//
// The runtime comes from Debian packages (hack/node-deps.sh installs them);
// the kubelet and kube-proxy from hack/testbin.sh node. Nothing is pulled:
// every image, the sandbox (pause) image too, is built locally and imported.
package nodecluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// hostRunDir is containerd's default state directory. Version 1.6 creates
// /run/containerd/s for shim sockets whatever "state" says.
const hostRunDir = "/run/containerd"

// DefaultCNIBinDir is where Debian's containernetworking-plugins installs
// the bridge, host-local, portmap and loopback plugins.
const DefaultCNIBinDir = "/usr/lib/cni"

// ContainerdOptions configure StartContainerd.
type ContainerdOptions struct {
	// SandboxImage is the CRI sandbox (pause) image. It must be imported
	// into the k8s.io namespace before the first pod: nothing is pulled.
	SandboxImage string
	// CNIBinDir holds the CNI plugins (default DefaultCNIBinDir).
	CNIBinDir string
	// Binary is the containerd binary (default: containerd on PATH).
	Binary string
	// Cgroups are the cgroups (by name under each hierarchy's root) whose
	// processes Stop kills and which it then removes: where containers of
	// this containerd run. Default "k8s.io" (ctr run's /<namespace>/<id>);
	// a kubelet's pods are under "kubepods".
	Cgroups []string
}

// Containerd is a running containerd of our own.
type Containerd struct {
	// Dir holds everything of this containerd: config.toml, root/, state/,
	// cni/net.d/ and containerd.log.
	Dir string
	// Socket is the gRPC (and CRI) socket path; kubelet's
	// --container-runtime-endpoint is "unix://" + Socket.
	Socket string
	// CNIConfDir is the CNI configuration directory the CRI plugin reads.
	CNIConfDir string

	cgroups []string
	cmd     *exec.Cmd
	// runDirExisted: /run/containerd was there before we started, so Stop
	// leaves it (containerd 1.6 puts shim sockets in /run/containerd/s
	// whatever its state directory is).
	runDirExisted bool
	done          chan struct{}
	err           error
	log           *os.File
}

// containerdConfig is a version 2 configuration (containerd 1.6 and 1.7).
// restrict_oom_score_adj: without CAP_SYS_RESOURCE every sandbox fails with
// "runc create failed: ... can't get final child's PID from pipe: EOF".
// enable_unprivileged_ports (containerd 2's default, and Docker's): a pod's
// non-root process may bind ports below 1024, as charts that serve on
// port 80 need (hello-world's probes); it is a per-pod network namespace
// sysctl, the host's is untouched.
// The opt plugin would otherwise create /opt/containerd.
const containerdConfig = `version = 2
root = %[1]q
state = %[2]q
oom_score = 0

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  restrict_oom_score_adj = true
  enable_unprivileged_ports = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[9]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
`

// StartContainerd writes a configuration under dir (created; an absolute
// path, short enough for a unix socket) and starts containerd on it,
// waiting until its socket answers. Stop it with Stop.
func StartContainerd(ctx context.Context, dir string, o ContainerdOptions) (*Containerd, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if o.CNIBinDir == "" {
		o.CNIBinDir = DefaultCNIBinDir
	}
	if o.Binary == "" {
		if o.Binary, err = exec.LookPath("containerd"); err != nil {
			return nil, fmt.Errorf("containerd is not installed (run hack/node-deps.sh): %w", err)
		}
	}
	c := &Containerd{
		Dir:        dir,
		Socket:     filepath.Join(dir, "containerd.sock"),
		CNIConfDir: filepath.Join(dir, "cni", "net.d"),
		cgroups:    o.Cgroups,
		done:       make(chan struct{}),
	}
	if len(c.cgroups) == 0 {
		c.cgroups = []string{"k8s.io"}
	}
	if _, err := os.Lstat(hostRunDir); err == nil {
		c.runDirExisted = true
	}
	if len(c.Socket) > 100 {
		return nil, fmt.Errorf("containerd socket path %s is too long for a unix socket", c.Socket)
	}
	for _, d := range []string{dir, c.CNIConfDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	cfg := fmt.Sprintf(containerdConfig,
		filepath.Join(dir, "root"), filepath.Join(dir, "state"),
		c.Socket, c.Socket+".ttrpc", filepath.Join(dir, "opt"),
		o.SandboxImage, o.CNIBinDir, c.CNIConfDir, filepath.Join(dir, "runc"))
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	if c.log, err = os.Create(filepath.Join(dir, "containerd.log")); err != nil {
		return nil, err
	}
	c.cmd = exec.Command(o.Binary, "--config", cfgPath)
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	// Its own process group, so a ^C to the test does not reach it before
	// Stop runs, and nothing of the caller's environment decides its paths.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.cmd.Env = append(os.Environ(), "PATH="+os.Getenv("PATH")+":/usr/sbin:/sbin")
	if err := c.cmd.Start(); err != nil {
		_ = c.log.Close()
		return nil, fmt.Errorf("starting containerd: %w", err)
	}
	go func() { c.err = c.cmd.Wait(); close(c.done) }()

	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if _, err := c.Ctr(wait, "version"); err == nil {
			return c, nil
		}
		select {
		case <-c.done:
			_ = c.Stop()
			return nil, fmt.Errorf("containerd exited: %w\n%s", c.err, c.Logs())
		case <-wait.Done():
			_ = c.Stop()
			return nil, fmt.Errorf("containerd did not answer on %s: %w\n%s", c.Socket, wait.Err(), c.Logs())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// PID of the containerd process.
func (c *Containerd) PID() int { return c.cmd.Process.Pid }

// Ctr runs ctr against this containerd and returns its combined output.
func (c *Containerd) Ctr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", c.Socket}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("ctr %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// RunDetached runs image as container id in namespace ns with ctr, in the
// background, keeping ctr's FIFOs and runc's state under Dir (their
// defaults are under /run/containerd).
func (c *Containerd) RunDetached(ctx context.Context, ns, image, id string) error {
	_, err := c.Ctr(ctx, "-n", ns, "run", "-d",
		"--fifo-dir", filepath.Join(c.Dir, "fifo"),
		"--runc-root", filepath.Join(c.Dir, "runc"),
		image, id)
	return err
}

// ImportImage imports an image tarball (docker-archive or OCI layout) into
// the k8s.io namespace, the one the CRI plugin (and so kubelet) uses.
func (c *Containerd) ImportImage(ctx context.Context, tarball string) error {
	_, err := c.Ctr(ctx, "-n", "k8s.io", "images", "import", "--no-unpack=false", tarball)
	return err
}

// Logs returns the last lines of containerd's log.
func (c *Containerd) Logs() string {
	data, _ := os.ReadFile(filepath.Join(c.Dir, "containerd.log"))
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 50 {
		lines = lines[len(lines)-50:]
	}
	return strings.Join(lines, "\n")
}

// Stop kills the containers still running (the processes of the Cgroups
// option), stops containerd by its PID (SIGTERM, then SIGKILL after 10 s),
// kills the shims it left (found by their -address flag, so only ours),
// removes those cgroups and unmounts whatever is still mounted under Dir.
// Dir itself is left for the logs; the caller removes it. Stop may be
// called more than once.
func (c *Containerd) Stop() error {
	var errs []error
	for _, cg := range c.cgroups {
		errs = append(errs, RemoveCgroups(cg))
	}
	if c.cmd != nil && c.cmd.Process != nil {
		select {
		case <-c.done:
		default:
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-c.done:
			case <-time.After(10 * time.Second):
				_ = c.cmd.Process.Kill()
				<-c.done
			}
		}
	}
	errs = append(errs, killShims(c.Socket))
	for _, cg := range c.cgroups {
		errs = append(errs, RemoveCgroups(cg))
	}
	errs = append(errs, UnmountUnder(c.Dir))
	if !c.runDirExisted {
		removeEmptyDirs(hostRunDir)
	}
	if c.log != nil {
		_ = c.log.Close()
	}
	return errors.Join(errs...)
}

// removeEmptyDirs removes dir and the directories under it, deepest first,
// as long as they are empty: what another containerd put there meanwhile
// (a socket, a FIFO) is kept, and so are the directories holding it.
func removeEmptyDirs(dir string) {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, p := range dirs {
		_ = os.Remove(p) // fails, as it should, when not empty
	}
}

// killShims kills the containerd-shim processes serving the containerd on
// socket: each carries "-address <socket>" on its command line.
func killShims(socket string) error {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, e := range ents {
		pid := 0
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid <= 1 {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		var address, ns, id string
		for i := 0; i+1 < len(args); i++ {
			switch args[i] {
			case "-address":
				address = args[i+1]
			case "-namespace":
				ns = args[i+1]
			case "-id":
				id = args[i+1]
			}
		}
		if address != socket {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		// A killed shim leaves its socket, which containerd 1.6 names
		// /run/containerd/s/<sha256(address/namespace/id)> whatever its
		// state directory is.
		if ns != "" && id != "" {
			sum := sha256.Sum256([]byte(filepath.Join(address, ns, id)))
			_ = os.Remove(filepath.Join(hostRunDir, "s", hex.EncodeToString(sum[:])))
		}
	}
	return nil
}

// UnmountUnder lazily unmounts every mount point at or under dir, deepest
// first.
func UnmountUnder(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	points, err := mountPoints()
	if err != nil {
		return err
	}
	var ours []string
	for _, p := range points {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			ours = append(ours, p)
		}
	}
	sort.Slice(ours, func(i, j int) bool { return len(ours[i]) > len(ours[j]) })
	var errs []error
	for _, p := range ours {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// mountPoints lists the mount points of this mount namespace.
func mountPoints() ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 {
			out = append(out, unescapeMount(f[4]))
		}
	}
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
