package memlimit

import "testing"

func TestFor(t *testing.T) {
	const mi = 1 << 20
	for _, tc := range []struct{ limit, exe, want int64 }{
		{512 * mi, 100 * mi, 396 * mi},   // the Deployment's 512Mi, a 100 MiB binary
		{4096 * mi, 100 * mi, 3686 * mi}, // a tenth at least: 4096 - 409.6
		{128 * mi, 100 * mi, 64 * mi},    // a half at most
		{512 * mi, 0, 460 * mi},          // executable unknown: a tenth
	} {
		if got := For(tc.limit, tc.exe); got/mi != tc.want/mi {
			t.Errorf("For(%d MiB, %d MiB) = %d MiB, want %d MiB", tc.limit/mi, tc.exe/mi, got/mi, tc.want/mi)
		}
	}
}

func TestSetRefusesGarbage(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv(EnvContainerLimit, "512Mi")
	if _, err := Set(); err == nil {
		t.Error("a limit that is not a number of bytes was accepted")
	}
	t.Setenv(EnvContainerLimit, "")
	if msg, err := Set(); err != nil || msg != "" {
		t.Errorf("no limit: %q %v", msg, err)
	}
}
