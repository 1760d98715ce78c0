package helm

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestLanesSlowOrder: the slow lane serves waiting renders in arrival
// order, those of owners whose last slow render hit the time limit last.
func TestLanesSlowOrder(t *testing.T) {
	l := &lanes{cfg: RenderLanes{Fast: 1, FastTimeout: time.Second, FastMemory: 1 << 20, Slow: 1}, slow: map[string]*slowMark{}}
	for _, o := range []string{"offender", "a", "b"} {
		l.markSlow(o)
	}
	l.slowDone("offender", time.Minute, true)
	hold, err := l.acquire(t.Context(), slowLane, "holder")
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 3)
	for _, o := range []string{"offender", "a", "b"} {
		go func() {
			release, err := l.acquire(context.Background(), slowLane, o)
			if err != nil {
				t.Error(err)
				return
			}
			order <- o
			release()
		}()
		// Arrival order.
		for {
			l.mu.Lock()
			queued := slices.ContainsFunc(l.queues[slowLane], func(t *ticket) bool { return t.owner == o })
			l.mu.Unlock()
			if queued {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	hold()
	var got []string
	for range 3 {
		got = append(got, <-order)
	}
	if want := []string{"a", "b", "offender"}; !slices.Equal(got, want) {
		t.Errorf("served %v, want %v", got, want)
	}
}

// TestLanesMarks: a slow render within the fast lane's time clears the
// mark; one over it keeps it; one that hit the time limit makes an
// offender.
func TestLanesMarks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		took     time.Duration
		timedOut bool
		slow     bool
		offender bool
	}{
		{"fast again", 100 * time.Millisecond, false, false, false},
		{"still slow", 5 * time.Second, false, true, false},
		{"time limit", 30 * time.Second, true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &lanes{cfg: RenderLanes{FastTimeout: time.Second}, slow: map[string]*slowMark{}}
			l.markSlow("o")
			l.slowDone("o", tc.took, tc.timedOut)
			if got := l.isSlow("o"); got != tc.slow {
				t.Errorf("slow = %v, want %v", got, tc.slow)
			}
			if m := l.slow["o"]; m != nil && m.timedOut != tc.offender {
				t.Errorf("offender = %v, want %v", m.timedOut, tc.offender)
			}
		})
	}
}

// TestLanesCancelledWait: a render whose caller gives up leaves the queue
// and takes no child.
func TestLanesCancelledWait(t *testing.T) {
	l := &lanes{cfg: RenderLanes{Fast: 1}, slow: map[string]*slowMark{}}
	hold, err := l.acquire(t.Context(), fastLane, "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if _, err := l.acquire(ctx, fastLane, "b"); err == nil {
		t.Fatal("acquired a busy lane")
	}
	hold()
	if l.busy[fastLane] != 0 || len(l.queues[fastLane]) != 0 {
		t.Errorf("busy %d, queued %d after both left", l.busy[fastLane], len(l.queues[fastLane]))
	}
}
