package nodecluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rukpak-dev/rukpak/internal/nodeimages"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// testbin returns the directory of hack/testbin.sh mode, built by make
// test-deps (or test-node-cluster) beforehand.
func testbin(t *testing.T, mode string) string {
	t.Helper()
	return testenv.MustTestbin(t, mode)
}

const readyPod = `apiVersion: v1
kind: Pod
metadata:
  name: ready
  namespace: default
spec:
  containers:
  - name: ready
    image: rukpak.test/ready:v1
    imagePullPolicy: Never
    ports: [{containerPort: 8080}]
    readinessProbe:
      httpGet: {path: /readyz, port: 8080}
      periodSeconds: 1
`

// TestClusterRunsReadyPod brings up the whole node cluster and runs a pod
// with a readiness probe to Ready, reaches the API server through the
// kubernetes Service and the kubelet through the API server; then the API
// server and kubelet crash (SIGKILL) while the pod runs, and teardown must
// leave the host as it was found: the teardown of a failed run.
//
// The teardown of a passing run is proved by the real-node e2e suite,
// whose TestMain fails unless its own cluster's teardown leaves the host
// as found (make test-e2e-node runs both), with far more on the host to
// undo than one pod. So one bring-up here proves what two did.
func TestClusterRunsReadyPod(t *testing.T) {
	requireNode(t)
	// Start waits its turn for the host (another checkout's node cluster)
	// and then brings a cluster up: minutes on a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitTimeout)
	defer cancel()
	assets := testbin(t, "envtest")
	nodeBin := testbin(t, "node")

	imgDir := t.TempDir()
	tars, err := nodeimages.BuildAll(ctx, imgDir, nodeimages.Options{}, nodeimages.Pause, nodeimages.Ready)
	if err != nil {
		t.Fatal(err)
	}
	var images []string
	for _, tb := range tars {
		images = append(images, tb.Path)
	}
	dir, err := os.MkdirTemp("", "rukpak-nc-")
	if err != nil {
		t.Fatal(err)
	}
	before, err := SnapshotHost(ctx)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	c, err := Start(ctx, dir, Options{Assets: assets, NodeBin: nodeBin, Images: images, SandboxImage: nodeimages.Pause.Ref()})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Stop()
		}
	}()
	t.Logf("node Ready after %s", time.Since(start).Round(time.Millisecond))
	for _, tm := range c.Timings {
		t.Logf("  %-22s %s", tm.Phase, tm.At)
	}

	podStart := time.Now()
	// The default ServiceAccount appears shortly after the controller
	// manager starts; retry until the pod is admitted.
	deadline := time.Now().Add(testenv.WaitTimeout)
	for {
		cmd := exec.CommandContext(ctx, filepath.Join(assets, "kubectl"), "--kubeconfig", c.Kubeconfig, "apply", "-f", "-")
		cmd.Stdin = strings.NewReader(readyPod)
		out, err := cmd.CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("creating pod: %v\n%s", err, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if out, err := c.Kubectl(ctx, "wait", "--for=condition=Ready", "pod/ready", "--timeout=90s"); err != nil {
		desc, _ := c.Kubectl(ctx, "describe", "pod", "ready")
		t.Fatalf("%v\n%s\n%s\n%s", err, out, desc, c.Logs("kubelet"))
	}
	t.Logf("pod Ready %s after it was created; whole bring-up %s", time.Since(podStart).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	// kube-proxy programmed the kubernetes Service: its ClusterIP reaches
	// the API server at the advertised host address.
	ca, err := os.ReadFile(filepath.Join(dir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.waitHTTPS(ctx, "https://"+kubeSvcIP+"/readyz", ca); err != nil {
		t.Errorf("kubernetes Service: %v", err)
	}
	// The API server reaches the kubelet (logs).
	if out, err := c.Kubectl(ctx, "logs", "ready"); err != nil {
		t.Errorf("kubectl logs: %v\n%s", err, out)
	}

	// The run fails: the API server and the kubelet crash under the pod.
	for _, p := range c.procs {
		if p.name == "kube-apiserver" || p.name == "kubelet" {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	stopStart := time.Now()
	stopped = true
	if err := c.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	t.Logf("teardown after the crash %s", time.Since(stopStart).Round(time.Millisecond))
	if err := os.RemoveAll(dir); err != nil {
		t.Errorf("removing %s: %v", dir, err)
	}
	after, err := SnapshotHost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := before.Diff(after); len(d) > 0 {
		t.Errorf("host not restored after components crashed:\n%s", strings.Join(d, "\n"))
	}
}

// TestClusterTeardownAfterFailedBringUp proves the host is restored after
// a bring-up that fails half way: containerd and the control plane up, an
// image that cannot be imported.
func TestClusterTeardownAfterFailedBringUp(t *testing.T) {
	requireNode(t)
	// Start waits its turn for the host (another checkout's node cluster)
	// and then brings a cluster up: minutes on a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitTimeout)
	defer cancel()
	assets := testbin(t, "envtest")
	nodeBin := testbin(t, "node")
	tars, err := nodeimages.BuildAll(ctx, t.TempDir(), nodeimages.Options{}, nodeimages.Pause)
	if err != nil {
		t.Fatal(err)
	}
	before, err := SnapshotHost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "rukpak-nc-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	c, err := Start(ctx, dir, Options{
		Assets: assets, NodeBin: nodeBin, SandboxImage: nodeimages.Pause.Ref(),
		Images: []string{tars[0].Path, filepath.Join(dir, "missing.tar")},
	})
	if err == nil {
		_ = c.Stop()
		t.Fatal("Start succeeded with an image tarball that does not exist")
	}
	t.Logf("Start failed as it should: %.200s", err)
	after, err := SnapshotHost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := before.Diff(after); len(d) > 0 {
		t.Errorf("host not restored after a failed bring-up:\n%s", strings.Join(d, "\n"))
	}
}
