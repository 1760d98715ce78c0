package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/rukpak-dev/rukpak/internal/nodecluster"
	"github.com/rukpak-dev/rukpak/internal/nodeimages"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// installMarker precedes the README block that installs rukpak; the
// real-node suite runs that block word for word.
const installMarker = "<!-- e2e:install -->"

// nodeSuite is the real-node mode (E2E_NODE=1, make test-e2e-node): a
// single-node cluster with a real kubelet, rukpak installed from manifests/
// as the README says, with the image from make image (RUKPAK_IMAGE_TAR).
type nodeSuite struct {
	cluster *nodecluster.Cluster
	before  nodecluster.HostState
	dir     string
}

// startNode brings the cluster up, imports the images and installs rukpak.
func startNode(ctx context.Context, root string) (*nodeSuite, error) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		return nil, errors.New("the real-node suite needs Linux and root (it runs containerd and a kubelet)")
	}
	imageTar := os.Getenv("RUKPAK_IMAGE_TAR")
	if imageTar == "" {
		return nil, errors.New("RUKPAK_IMAGE_TAR names the tarball of make image (make test-e2e-node sets it)")
	}
	if _, err := os.Stat(imageTar); err != nil {
		return nil, fmt.Errorf("the rukpak image: %w", err)
	}
	assets, err := testbin(root, "envtest")
	if err != nil {
		return nil, err
	}
	nodeBin, err := testbin(root, "node")
	if err != nil {
		return nil, err
	}
	// Short: containerd's socket lives under it.
	dir, err := os.MkdirTemp("", "rukpak-nc-")
	if err != nil {
		return nil, err
	}
	s := &nodeSuite{dir: dir}
	start := time.Now()
	if err := os.MkdirAll(filepath.Join(dir, "images"), 0o755); err != nil {
		return nil, err
	}
	tars, err := nodeimages.BuildAll(ctx, filepath.Join(dir, "images"), nodeimages.Options{})
	if err != nil {
		return nil, fmt.Errorf("building the test images: %w", err)
	}
	images := []string{imageTar}
	for _, t := range tars {
		images = append(images, t.Path)
	}
	fmt.Printf("e2e-node: test images built in %s\n", time.Since(start).Round(time.Millisecond))
	c, err := nodecluster.Start(ctx, filepath.Join(dir, "c"), nodecluster.Options{
		Assets: assets, NodeBin: nodeBin, Images: images, SandboxImage: nodeimages.Pause.Ref(),
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting the node cluster: %w", err)
	}
	s.cluster = c
	// The host as the cluster found it once it had the host to itself:
	// another checkout's node cluster may have run until then.
	s.before = c.HostBefore()
	var phases []string
	for _, tm := range c.Timings {
		phases = append(phases, fmt.Sprintf("%s %s", tm.Phase, tm.At))
	}
	fmt.Printf("e2e-node: node Ready in %s (%s; logs in %s)\n", c.Timings[len(c.Timings)-1].At, strings.Join(phases, ", "), c.Dir)
	// The admin's kubectl: the one built with the control plane.
	_ = os.Setenv("PATH", assets+string(os.PathListSeparator)+os.Getenv("PATH"))

	block, err := readmeBlock(filepath.Join(root, "README.md"), installMarker)
	if err != nil {
		return nil, errors.Join(err, s.stop())
	}
	installStart := time.Now()
	cmd := exec.CommandContext(ctx, "bash", "-euxo", "pipefail", "-c", block)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	if err := cmd.Run(); err != nil {
		s.dumpRukpak(ctx)
		return nil, errors.Join(fmt.Errorf("installing rukpak as the README says: %w", err), s.stop())
	}
	fmt.Printf("e2e-node: rukpak installed from the README in %s\n", time.Since(installStart).Round(time.Millisecond))
	if err := waitWebhookAnswers(ctx, c.Kubeconfig); err != nil {
		s.dumpRukpak(ctx)
		return nil, errors.Join(err, s.stop())
	}
	return s, nil
}

// waitWebhookAnswers waits until the API server reaches the webhook through
// its Service: a rollout is complete when the pod is Ready, a moment before
// kube-proxy routes the Service to it, and until then every create of a
// Bundle or BundleDeployment fails with "connection refused".
func waitWebhookAnswers(ctx context.Context, kubeconfig string) error {
	const probe = `{"apiVersion":"core.rukpak.io/v1alpha1","kind":"Bundle","metadata":{"name":"e2e-webhook-probe"},"spec":{"provisionerClassName":"core-rukpak-io-plain","source":{"type":"image","image":{"ref":"example.com/probe:v1"}}}}`
	start := time.Now()
	var last []byte
	for time.Since(start) < time.Minute {
		cmd := exec.CommandContext(ctx, "kubectl", "create", "--dry-run=server", "-f", "-")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		cmd.Stdin = strings.NewReader(probe)
		out, err := cmd.CombinedOutput()
		if err == nil {
			fmt.Printf("e2e-node: the webhook answers through its Service after %s\n", time.Since(start).Round(time.Millisecond))
			return nil
		}
		last = out
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("the webhook did not answer through its Service within a minute: %s", last)
}

// stop tears the cluster down and reports what it left on the host.
func (s *nodeSuite) stop() error {
	var errs []error
	if s.cluster != nil {
		errs = append(errs, s.cluster.Stop())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	after, err := nodecluster.SnapshotHost(ctx)
	if err != nil {
		errs = append(errs, err)
	} else if d := s.before.Diff(after); len(d) > 0 {
		errs = append(errs, fmt.Errorf("the host is not as it was found:\n%s", strings.Join(d, "\n")))
	}
	return errors.Join(errs...)
}

// keepLogsOnly removes the images, container and etcd data of a failed
// run and keeps the components' logs for a look (containerd's, from its
// own directory, too).
func (s *nodeSuite) keepLogsOnly() {
	_ = os.RemoveAll(filepath.Join(s.dir, "images"))
	if s.cluster == nil {
		return
	}
	if s.cluster.Containerd != nil {
		_ = os.Rename(filepath.Join(s.cluster.Containerd.Dir, "containerd.log"), filepath.Join(s.cluster.Dir, "containerd.log"))
	}
	ents, _ := os.ReadDir(s.cluster.Dir)
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".log") {
			_ = os.RemoveAll(filepath.Join(s.cluster.Dir, e.Name()))
		}
	}
}

// dumpRukpak prints rukpak's pods, events and logs, for a failed run.
func (s *nodeSuite) dumpRukpak(ctx context.Context) {
	for _, args := range [][]string{
		{"get", "nodes,pods", "-A", "-o", "wide"},
		{"-n", "rukpak-system", "get", "events", "--sort-by=.lastTimestamp"},
		{"-n", "rukpak-system", "logs", "-l", "app.kubernetes.io/name=rukpak-core", "--prefix", "--tail=40"},
		{"-n", "rukpak-system", "logs", "-l", "app.kubernetes.io/name=rukpak-webhook", "--prefix", "--tail=30"},
	} {
		out, _ := s.cluster.Kubectl(ctx, args...)
		fmt.Printf("---- kubectl %s ----\n%s\n", strings.Join(args, " "), out)
	}
}

// restartKubelet restarts the node's kubelet; containers keep running.
func (s *nodeSuite) restartKubelet(ctx context.Context) error {
	return s.cluster.RestartKubelet(ctx)
}

// readmeBlock returns the fenced code block that follows marker in path.
func readmeBlock(path, marker string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	var block []string
	state := 0 // 0 before the marker, 1 before the fence, 2 inside it
	for sc.Scan() {
		line := sc.Text()
		switch {
		case state == 0 && strings.TrimSpace(line) == marker:
			state = 1
		case state == 1 && strings.HasPrefix(line, "```"):
			state = 2
		case state == 2 && strings.HasPrefix(line, "```"):
			return strings.Join(block, "\n") + "\n", nil
		case state == 2:
			block = append(block, line)
		}
	}
	return "", fmt.Errorf("%s: no code block after %q", path, marker)
}

// testbin returns the directory of hack/testbin.sh mode, which make
// test-deps builds beforehand (the suite never builds it).
func testbin(_, mode string) (string, error) {
	return testenv.Testbin(mode)
}
