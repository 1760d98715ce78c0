package testenv

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestMain(m *testing.M) { os.Exit(RunShared(m)) }

// TestShared: every caller gets the one server, and Namespace gives each a
// namespace of its own on it.
func TestShared(t *testing.T) {
	a, b := Shared(t), Shared(t)
	if a != b {
		t.Fatal("two calls of Shared started two API servers")
	}
	seen := map[string]bool{}
	for range 3 {
		name := Namespace(t, a, "tenant")
		if seen[name] {
			t.Fatalf("namespace %s given twice", name)
		}
		seen[name] = true
		if err := b.Client.Get(context.Background(), client.ObjectKey{Name: name}, &corev1.Namespace{}); err != nil {
			t.Errorf("namespace %s: %v", name, err)
		}
	}
}

// Testbin never builds: with nothing built (an empty cache), it fails at
// once, naming what is missing and the command that builds it, instead of
// spending the test's timeout on a build.
func TestTestbinNeverBuilds(t *testing.T) {
	t.Setenv("RUKPAK_TESTBIN_CACHE", t.TempDir())
	for _, target := range []string{"envtest", "all", "node", "helm", "cert-manager"} {
		dir, err := Testbin(target)
		if err == nil || !strings.Contains(err.Error(), "is not built") || !strings.Contains(err.Error(), "make test-deps") {
			t.Errorf("Testbin(%q) in an empty cache: %q, %v; want an error naming make test-deps", target, dir, err)
		}
	}
	entries, err := os.ReadDir(os.Getenv("RUKPAK_TESTBIN_CACHE"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != ".lock" {
			t.Errorf("the check wrote %s into the cache", e.Name())
		}
	}
}
