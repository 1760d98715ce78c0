package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rukpak-dev/rukpak/internal/devenv"
	"github.com/rukpak-dev/rukpak/internal/testenv"
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
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	ex := serveReadmeExamples(ctx, t)
	if err := ex.ServeCatalog(ctx, testenv.SharedTestdata("catalogs", "kube-green"), devenv.KubeGreenDeprecations); err != nil {
		t.Fatalf("serving the catalog example: %v", err)
	}
	ctl, err := rukpakctl()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _, _ = kubectl(t, "", "delete", "bd", "kube-green", "--ignore-not-found", "--wait", "--timeout=5m")
		_, _, _ = kubectl(t, "", "delete", "catalog", "operators", "--ignore-not-found", "--wait", "--timeout=5m")
	}()
	out := runReadmeBlock(ctx, t, readmeWalk{
		marker: readmeCatalogMarker,
		names:  []string{"127.0.0.1:5001/" + devenv.CatalogExampleImage, "127.0.0.1:5001/" + devenv.CatalogExampleDeprecatedImage},
		replace: []string{
			"127.0.0.1:5001", ex.registry,
			"bin/rukpakctl ", ctl + " ",
			".run/content-ca.pem", suite.local.ContentCA,
		},
		bd: "kube-green",
	})
	regAddr := ex.registry

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
