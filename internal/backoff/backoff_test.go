package backoff

import (
	"testing"
	"time"
)

func TestFailures(t *testing.T) {
	f := Failures{Base: time.Second, Max: 5 * time.Second}
	a := Of{UID: "a", Generation: 1}
	if w := f.Wait("x", a); w != 0 {
		t.Fatalf("wait before a failure: %s", w)
	}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		if got := f.Failed("x", a); got != want {
			t.Fatalf("failure %d: wait %s, want %s", i+1, got, want)
		}
	}
	if w := f.Wait("x", a); w <= 4*time.Second || w > 5*time.Second {
		t.Fatalf("wait %s, want (4s, 5s]", w)
	}
	if w := f.Wait("x", Of{UID: "a", Generation: 2}); w != 0 {
		t.Fatalf("a new generation waits %s", w)
	}
	if w := f.Wait("x", Of{UID: "b", Generation: 1}); w != 0 {
		t.Fatalf("a new incarnation waits %s", w)
	}
	if got := f.Failed("x", Of{UID: "a", Generation: 2}); got != time.Second {
		t.Fatalf("a new generation's first failure waits %s", got)
	}
	f.Forget("x")
	if w := f.Wait("x", Of{UID: "a", Generation: 2}); w != 0 {
		t.Fatalf("wait after Forget: %s", w)
	}
	// Many failures never overflow the shift.
	for range 100 {
		f.Failed("y", a)
	}
	if w := f.Wait("y", a); w <= 0 || w > 5*time.Second {
		t.Fatalf("wait after 100 failures: %s", w)
	}
}
