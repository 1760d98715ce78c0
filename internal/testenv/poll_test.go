package testenv

import (
	"testing"
	"time"
)

// A wait polls every 100 ms while it is short, then every tenth of the
// time waited, never less often than once a second: a ten-minute wait
// polls about 650 times, not 6000.
func TestPollPause(t *testing.T) {
	for _, tc := range []struct{ elapsed, want time.Duration }{
		{0, 100 * time.Millisecond},
		{500 * time.Millisecond, 100 * time.Millisecond},
		{3 * time.Second, 300 * time.Millisecond},
		{10 * time.Second, time.Second},
		{WaitTimeout, time.Second},
	} {
		if got := PollPause(tc.elapsed); got != tc.want {
			t.Errorf("PollPause(%s) = %s, want %s", tc.elapsed, got, tc.want)
		}
	}
	polls := 0
	for elapsed := time.Duration(0); elapsed < WaitTimeout; elapsed += PollPause(elapsed) {
		polls++
	}
	if polls > 700 {
		t.Errorf("a wait of %s polls %d times, want at most 700", WaitTimeout, polls)
	}
}
