package e2e

import (
	"context"
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

// readmeCatalogMarker precedes the README's catalog walk-through.
const readmeCatalogMarker = "<!-- e2e: TestReadmeCatalog runs this block as written -->"

// TestReadmeCatalog runs the README's catalog walk-through as written
// against the catalog example `make run` serves (devenv.ServeCatalog on
// kube-green's real catalog and bundles, here on a free port: the only
// changes to the block are that address, bin/ and .run/): kube-green
// installs from the catalog at a pinned range, upgrades along its replaces
// chain when the range widens, waits for approval in Manual mode, shows
// the deprecation the catalog's next tag adds, and rukpakctl's resolution
// agrees with what the provisioner recorded.
func TestReadmeCatalog(t *testing.T) {
	if suite.local == nil {
		t.Skip("needs the local environment, whose provisioner reaches the example registry on this host's loopback")
	}
	shared(t)
	root := testenv.RepoRoot()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	regAddr := testnet.FreeAddr(t)
	ex, err := devenv.ServeExamples(ctx, root, t.TempDir(), regAddr, testnet.FreeAddr(t))
	if err != nil {
		t.Fatalf("serving the examples: %v", err)
	}
	defer ex.Close()
	if err := ex.ServeCatalog(ctx, testenv.SharedTestdata("catalogs", "kube-green"), devenv.KubeGreenDeprecations); err != nil {
		t.Fatalf("serving the catalog example: %v", err)
	}
	ctl, err := rukpakctl()
	if err != nil {
		t.Fatal(err)
	}

	block, err := readmeBlock(filepath.Join(root, "README.md"), readmeCatalogMarker)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"127.0.0.1:5001/" + devenv.CatalogExampleImage, "127.0.0.1:5001/" + devenv.CatalogExampleDeprecatedImage, "bin/rukpakctl ", ".run/content-ca.pem"} {
		if !strings.Contains(block, want) {
			t.Fatalf("the README's catalog block no longer names %s:\n%s", want, block)
		}
	}
	block = strings.NewReplacer("127.0.0.1:5001", regAddr, "bin/rukpakctl ", ctl+" ", ".run/content-ca.pem", suite.local.ContentCA).Replace(block)
	defer func() {
		_, _, _ = kubectl(t, "", "delete", "bd", "kube-green", "--ignore-not-found", "--wait", "--timeout=5m")
		_, _, _ = kubectl(t, "", "delete", "catalog", "operators", "--ignore-not-found", "--wait", "--timeout=5m")
	}()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", block)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+suite.kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		status, _, _ := kubectl(t, "", "get", "bd", "kube-green", "-o", "yaml")
		t.Fatalf("the README's catalog block: %v\n%s\n%s", err, out, status)
	}

	// The provisioner's record of what it installed and resolved, and
	// rukpakctl's resolution of the same source, printed by the block.
	installed := jsonpath(t, "bd/kube-green", "{.status.catalog.installed.name} {.status.catalog.installed.image}")
	resolved := jsonpath(t, "bd/kube-green", "{.status.catalog.resolved.name}")
	if resolved != "kube-green.v0.7.0" || !strings.HasPrefix(installed, "kube-green.v0.7.0 "+regAddr+"/kube-green-bundle@sha256:") {
		t.Fatalf("status.catalog: installed %q, resolved %q; want kube-green.v0.7.0 from the example registry", installed, resolved)
	}
	image := strings.Fields(installed)[1]
	for _, want := range []string{
		`(?m)^alpha\s+kube-green\.v0\.7\.1\s+0\.3\.0 .*0\.7\.1$`, // catalog list: the channel's head and versions
		`bundle "kube-green.v0.7.0": kube-green 0.7.0 is deprecated`,
		`(?m)^Installed:\s+kube-green\.v0\.7\.0 \(0\.7\.0\)$`,
		`(?m)^Bundle:\s+` + regexp.QuoteMeta(resolved) + `$`,
		`(?m)^Image:\s+` + regexp.QuoteMeta(image) + `$`,
		`(?m)^Bundle\s+kube-green\.v0\.7\.0\s+kube-green 0\.7\.0 is deprecated`,
		`Upgrade path: none, kube-green.v0.7.0 stays installed`,
	} {
		if !regexp.MustCompile(want).Match(out) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	// The pivots happened: each installed version was a Bundle of its own,
	// and the superseded ones are gone.
	bundles := mustKubectl(t, "", "get", "bundles", "-l", "core.rukpak.io/owner-name=kube-green", "-o", "name")
	if n := len(strings.Fields(bundles)); n != 1 {
		t.Errorf("%d Bundles of kube-green after its pivots, want the active one:\n%s", n, bundles)
	}
}
