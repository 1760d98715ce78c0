package nodecluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rukpak-dev/rukpak/internal/nodeimages"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// requireNode skips unless the real-node tests were asked for
// (RUKPAK_NODE_E2E=1), we are root, and the runtime is installed.
func requireNode(t *testing.T) {
	t.Helper()
	if os.Getenv("RUKPAK_NODE_E2E") != "1" {
		t.Skip("real-node test: set RUKPAK_NODE_E2E=1 (needs root and hack/node-deps.sh) to run it")
	}
	if os.Geteuid() != 0 {
		t.Skip("real-node test: needs root")
	}
	for _, b := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("real-node test: %s is not installed; run hack/node-deps.sh", b)
		}
	}
}

// TestContainerdRunsImportedPause starts a containerd of our own, imports
// the locally built pause image, runs it with runc, stops everything by PID
// and checks the host is as it was found.
func TestContainerdRunsImportedPause(t *testing.T) {
	requireNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitTimeout)
	defer cancel()

	before, err := SnapshotHost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	images := t.TempDir()
	pause, err := nodeimages.BuildTarball(ctx, nodeimages.Pause, images, nodeimages.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Short: the socket path must fit a unix socket address.
	dir, err := os.MkdirTemp("", "rukpak-ctd-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)

	start := time.Now()
	c, err := StartContainerd(ctx, dir, ContainerdOptions{SandboxImage: nodeimages.Pause.Ref()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("containerd (pid %d) answering after %s", c.PID(), time.Since(start).Round(time.Millisecond))
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Stop()
		}
	}()

	// The CRI plugin (kubelet's endpoint) loaded our configuration.
	plugins, err := c.Ctr(ctx, "plugins", "ls")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^io\.containerd\.grpc\.v1\s+cri\s+\S+\s+ok\s*$`).MatchString(plugins) {
		t.Fatalf("CRI plugin not loaded:\n%s\n%s", plugins, c.Logs())
	}
	if err := c.ImportImage(ctx, pause.Path); err != nil {
		t.Fatal(err)
	}
	out, err := c.Ctr(ctx, "-n", "k8s.io", "images", "ls", "-q")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, nodeimages.Pause.Ref()) {
		t.Fatalf("pause image %s not in k8s.io images:\n%s", nodeimages.Pause.Ref(), out)
	}

	// Run the pause image as a plain container: runc, the overlayfs
	// snapshotter and the shim work on this host.
	const id = "rukpak-pause-test"
	if err := c.RunDetached(ctx, "k8s.io", nodeimages.Pause.Ref(), id); err != nil {
		t.Fatalf("%v\n%s", err, c.Logs())
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := c.Ctr(ctx, "-n", "k8s.io", "tasks", "ls")
		if err == nil && strings.Contains(out, id) && strings.Contains(out, "RUNNING") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pause task not running: %v\n%s", err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The pause binary exits on SIGTERM. RUNNING can come before it
	// handles the signal: as PID 1 of its namespace, a SIGTERM that comes
	// earlier is dropped by the kernel (it failed so under load ~20).
	// So SIGTERM again every 2 s; never SIGKILL.
	deadline = time.Now().Add(2 * time.Minute)
	for sent, next := 0, time.Now(); ; {
		if !time.Now().Before(next) {
			// A later kill can find the task just exited.
			if _, err := c.Ctr(ctx, "-n", "k8s.io", "tasks", "kill", "-s", "SIGTERM", id); err != nil && sent == 0 {
				t.Fatal(err)
			}
			sent++
			next = time.Now().Add(2 * time.Second)
		}
		out, _ := c.Ctr(ctx, "-n", "k8s.io", "tasks", "ls")
		if !strings.Contains(out, "RUNNING") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pause did not stop on SIGTERM:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := c.Ctr(ctx, "-n", "k8s.io", "tasks", "delete", id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ctr(ctx, "-n", "k8s.io", "containers", "delete", id); err != nil {
		t.Fatal(err)
	}

	pid := c.PID()
	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
		t.Fatalf("containerd pid %d still exists after Stop", pid)
	}
	after, err := SnapshotHost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := before.Diff(after); len(d) > 0 {
		t.Fatalf("host changed:\n%s", strings.Join(d, "\n"))
	}
}

// TestContainerdStopKillsRunningContainers is teardown after a failed run:
// Stop is called with a container still running, and must leave neither
// its processes, cgroups and mounts nor containerd's behind.
func TestContainerdStopKillsRunningContainers(t *testing.T) {
	requireNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitTimeout)
	defer cancel()

	before, err := SnapshotHost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pause, err := nodeimages.BuildTarball(ctx, nodeimages.Pause, t.TempDir(), nodeimages.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "rukpak-ctd-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	c, err := StartContainerd(ctx, dir, ContainerdOptions{SandboxImage: nodeimages.Pause.Ref()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop() }()
	if err := c.ImportImage(ctx, pause.Path); err != nil {
		t.Fatal(err)
	}
	if err := c.RunDetached(ctx, "k8s.io", nodeimages.Pause.Ref(), "left-running"); err != nil {
		t.Fatalf("%v\n%s", err, c.Logs())
	}
	during, err := SnapshotHost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := before.Diff(during); len(d) == 0 {
		t.Fatal("a running container changed nothing the host snapshot sees")
	} else {
		t.Logf("while running:\n%s", strings.Join(d, "\n"))
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	after, err := SnapshotHost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := before.Diff(after); len(d) > 0 {
		t.Fatalf("host changed:\n%s", strings.Join(d, "\n"))
	}
}
