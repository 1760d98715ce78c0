package nodecluster

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestLockHostWaitsForTheHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	held, err := lockHost(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	if _, err := lockHost(ctx, path); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second lock while held: %v, want it to wait until its context ends", err)
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := lockHost(t.Context(), path)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	_ = again.Close()
}
