// Package testcertmanager runs cert-manager against a test cluster: its
// CRDs, and its own certificate and issuer controllers and CA injector
// (hack/certmanager, built from cert-manager's published module by
// hack/testbin.sh) as a process of the test. Suites use it to prove what
// rukpak does with cert-manager on clusters that standardise on it.
package testcertmanager

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// Dir returns the directory holding the cert-manager binary and crds.yaml
// (make test-deps builds them; tb fails at once, naming that, when they are
// not built).
func Dir(tb testing.TB) string {
	tb.Helper()
	return testenv.MustTestbin(tb, "cert-manager")
}

// CertManager is a running cert-manager.
type CertManager struct {
	// Log is the file its output goes to.
	Log string
	cmd *exec.Cmd
}

// Start installs cert-manager's CRDs into the cluster of kubeconfig with
// kubectl and runs cert-manager until tb ends. Its log is kept in
// tb's temporary directory and printed when tb fails.
func Start(tb testing.TB, kubectl, kubeconfig string) *CertManager {
	tb.Helper()
	dir := Dir(tb)
	run := func(args ...string) {
		tb.Helper()
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			tb.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("apply", "--server-side", "--force-conflicts", "-f", filepath.Join(dir, "crds.yaml"))
	// kubectl wait fails at once on a CRD the API server has not given
	// conditions yet (".status.conditions accessor error: <nil>"), which a
	// loaded machine shows: ask again until testenv.WaitTimeout is up.
	waitArgs := []string{"--kubeconfig", kubeconfig, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/certificates.cert-manager.io", "crd/issuers.cert-manager.io", "crd/clusterissuers.cert-manager.io", "crd/certificaterequests.cert-manager.io"}
	for start := time.Now(); ; {
		out, err := exec.Command(kubectl, waitArgs...).CombinedOutput()
		if err == nil {
			break
		}
		if time.Since(start) > testenv.WaitTimeout {
			tb.Fatalf("kubectl %s, for %s: %v\n%s", strings.Join(waitArgs[2:], " "), testenv.WaitTimeout, err, out)
		}
		time.Sleep(time.Second)
	}

	logPath := filepath.Join(tb.TempDir(), "cert-manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		tb.Fatalf("creating cert-manager log: %v", err)
	}
	cmd := exec.Command(filepath.Join(dir, "cert-manager"), "--kubeconfig", kubeconfig, "--v=2")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		tb.Fatalf("starting cert-manager: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	cm := &CertManager{Log: logPath, cmd: cmd}
	// Its controllers are running once it says so; an early exit fails now,
	// with its reason, instead of as a timeout later.
	deadline := time.After(testenv.WaitTimeout)
	for started := false; !started; {
		select {
		case <-exited:
			out, _ := os.ReadFile(logPath)
			tb.Fatalf("cert-manager exited: %v\n%s", cmd.ProcessState, tail(out, 8<<10))
		case <-deadline:
			out, _ := os.ReadFile(logPath)
			tb.Fatalf("cert-manager did not log %q within %s:\n%s", startedLine, testenv.WaitTimeout, tail(out, 8<<10))
		case <-time.After(100 * time.Millisecond):
			out, _ := os.ReadFile(logPath)
			started = bytes.Contains(out, []byte(startedLine))
		}
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = logFile.Close()
		if tb.Failed() {
			if out, err := os.ReadFile(logPath); err == nil {
				tb.Logf("cert-manager log (last 8 KiB):\n%s", tail(out, 8<<10))
			}
		}
	})
	return cm
}

// startedLine is what hack/certmanager logs once its controllers run.
const startedLine = "started cert-manager controllers"

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// String names the process, for messages.
func (c *CertManager) String() string {
	return fmt.Sprintf("cert-manager (pid %d, log %s)", c.cmd.Process.Pid, c.Log)
}
