package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rukpak-dev/rukpak/internal/devenv"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testnet"
)

// readmeHelmMarker precedes the README's helm walk-through.
const readmeHelmMarker = "<!-- e2e: TestReadmeHelm runs this block as written -->"

// TestReadmeHelm runs the README's helm walk-through as written against
// the examples `make run` serves (devenv.ServeExamples, here on free ports:
// the only change to the block is their address): hello-world installs
// from the git server through the helm class, a value change upgrades it
// to revision 2, and Helm's records show revision 1 superseded and 2
// deployed.
func TestReadmeHelm(t *testing.T) {
	if suite.local == nil {
		t.Skip("needs the local environment, whose provisioner reaches the examples on this host's loopback")
	}
	shared(t)
	root := testenv.RepoRoot()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	regAddr, gitAddr := testnet.FreeAddr(t), testnet.FreeAddr(t)
	ex, err := devenv.ServeExamples(ctx, root, t.TempDir(), regAddr, gitAddr)
	if err != nil {
		t.Fatalf("serving the examples: %v", err)
	}
	defer ex.Close()

	block, err := readmeBlock(filepath.Join(root, "README.md"), readmeHelmMarker)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(block, "http://127.0.0.1:5002/charts") {
		t.Fatalf("the README's helm block no longer installs from the example git server:\n%s", block)
	}
	block = strings.ReplaceAll(block, "127.0.0.1:5002", gitAddr)
	defer func() {
		_, _, _ = kubectl(t, "", "delete", "bd", "hello-world", "--ignore-not-found", "--wait", "--timeout=2m")
	}()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", block)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+suite.kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		status, _, _ := kubectl(t, "", "get", "bd", "hello-world", "-o", "yaml")
		t.Fatalf("the README's helm block: %v\n%s\n%s", err, out, status)
	}
	for _, want := range []string{
		`(?m)^sh\.helm\.release\.v1\.hello-world\.v1\s.*\s1\s+superseded$`,
		`(?m)^sh\.helm\.release\.v1\.hello-world\.v2\s.*\s2\s+deployed$`,
	} {
		if !regexp.MustCompile(want).Match(out) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	// Rows of the listing (the wait before it names the record too).
	if n := len(regexp.MustCompile(`(?m)^sh\.helm\.release\.v1\.hello-world\.v\d+\s`).FindAll(out, -1)); n != 2 {
		t.Errorf("%d release records listed, want 2:\n%s", n, out)
	}
	if got := jsonpath(t, "deploy/hello-world -n default", "{.spec.replicas}"); got != "2" {
		t.Errorf("hello-world replicas %s, want 2", got)
	}

	// The README's next block deletes it; everything it installed goes.
	mustKubectl(t, "", "delete", "bd", "hello-world", "--wait", "--timeout=2m")
	eventually(t, time.Minute, "hello-world's Deployment gone", func() error {
		out, errOut, err := kubectl(t, "", "get", "deploy/hello-world", "-n", "default", "--ignore-not-found", "-o", "name")
		if err != nil {
			return fmt.Errorf("%w: %s", err, errOut)
		}
		if strings.TrimSpace(out) != "" {
			return fmt.Errorf("%s is still there", strings.TrimSpace(out))
		}
		return nil
	})
}
