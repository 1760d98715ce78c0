package testenv

import (
	"context"
	"os"
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
