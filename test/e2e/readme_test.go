package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rukpak-dev/rukpak/internal/devenv"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testnet"
)

// readmeExamples are the examples `make run` serves (devenv.ServeExamples),
// here on free ports so that a README walk-through runs beside make run.
type readmeExamples struct {
	*devenv.Examples
	registry, git string // host:port of each
}

// serveReadmeExamples serves the examples until the test ends; it skips
// the test outside the local environment, whose provisioner reaches them
// on this host's loopback.
func serveReadmeExamples(ctx context.Context, t *testing.T) readmeExamples {
	t.Helper()
	if suite.local == nil {
		t.Skip("needs the local environment, whose provisioner reaches the examples on this host's loopback")
	}
	shared(t)
	ex := readmeExamples{registry: testnet.FreeAddr(t), git: testnet.FreeAddr(t)}
	var err error
	ex.Examples, err = devenv.ServeExamples(ctx, testenv.RepoRoot(), t.TempDir(), ex.registry, ex.git)
	if err != nil {
		t.Fatalf("serving the examples: %v", err)
	}
	t.Cleanup(ex.Close)
	return ex
}

// readmeWalk is one README walk-through that a test runs as written.
type readmeWalk struct {
	marker string   // the HTML comment that precedes its code block
	names  []string // what the block must still name, so the test keeps testing what the README says
	// replace holds old, new pairs: the only changes made to the block
	// (addresses of the examples, bin/ and .run/ paths); each old must
	// be in the block.
	replace []string
	// bd is the BundleDeployment whose status is printed if the block
	// fails.
	bd string
}

// runReadmeBlock runs the README block of w with bash -euo pipefail
// against the suite's cluster and returns its combined output; it fails
// the test, with the output and w.bd's status, if the block fails.
func runReadmeBlock(ctx context.Context, t *testing.T, w readmeWalk) []byte {
	t.Helper()
	block, err := readmeBlock(filepath.Join(testenv.RepoRoot(), "README.md"), w.marker)
	if err != nil {
		t.Fatal(err)
	}
	names := append([]string(nil), w.names...)
	for i := 0; i+1 < len(w.replace); i += 2 {
		names = append(names, w.replace[i])
	}
	for _, want := range names {
		if !strings.Contains(block, want) {
			t.Fatalf("the README's block after %s no longer names %s:\n%s", w.marker, want, block)
		}
	}
	block = strings.NewReplacer(w.replace...).Replace(block)
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", block)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+suite.kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		status, _, _ := kubectl(t, "", "get", "bd", w.bd, "-o", "yaml")
		t.Fatalf("the README's block after %s: %v\n%s\n%s", w.marker, err, out, status)
	}
	return out
}
