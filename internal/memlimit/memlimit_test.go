package memlimit

import "testing"

func TestFor(t *testing.T) {
	const mi = 1 << 20
	for _, tc := range []struct{ limit, exe, want int64 }{
		{512 * mi, 76 * mi, 292 * mi},   // the Deployment's 512Mi, a 76 MiB binary: 512 - 128 - 76 - 16
		{2048 * mi, 76 * mi, 1444 * mi}, // 2048 - 512 - 76 - 16
		{4096 * mi, 76 * mi, 3492 * mi}, // the quarter at most 512 MiB: 4096 - 512 - 76 - 16
		{128 * mi, 76 * mi, 64 * mi},    // a half at most
		{512 * mi, 0, 368 * mi},         // executable unknown: 512 - 128 - 16
		{64 << 30, 76 * mi, 64932 * mi}, // 64 GiB: 65536 - 512 - 76 - 16
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
