package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ex := serveReadmeExamples(ctx, t)
	defer func() {
		_, _, _ = kubectl(t, "", "delete", "bd", "hello-world", "--ignore-not-found", "--wait", "--timeout=2m")
	}()
	out := runReadmeBlock(ctx, t, readmeWalk{
		marker:  readmeHelmMarker,
		names:   []string{"http://127.0.0.1:5002/charts"},
		replace: []string{"127.0.0.1:5002", ex.git},
		bd:      "hello-world",
	})
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
