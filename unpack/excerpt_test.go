package unpack

import (
	"strings"
	"testing"
)

func TestExcerpt(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"short", "not found\n", "not found"},
		{"controls", "a\x00b\x1b[31mc\r\nd", "a b [31mc d"},
		{"invalid utf-8", "ok\xff\xfe done", "ok done"},
		{"long", strings.Repeat("x", 300), strings.Repeat("x", MaxExcerpt) + "..."},
		{"cut rune", strings.Repeat("x", MaxExcerpt-1) + "é and more", strings.Repeat("x", MaxExcerpt-1) + "..."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Excerpt(strings.NewReader(tc.in)); got != tc.want {
				t.Errorf("Excerpt(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestExcerptReadsAtMostItsLimit(t *testing.T) {
	r := strings.NewReader(strings.Repeat("y", 1<<20))
	Excerpt(r)
	if read := (1 << 20) - r.Len(); read > MaxExcerpt+1 {
		t.Fatalf("read %d bytes, want at most %d", read, MaxExcerpt+1)
	}
}

func TestStatusText(t *testing.T) {
	for code, want := range map[int]string{404: "404 Not Found", 503: "503 Service Unavailable", 299: "299"} {
		if got := StatusText(code); got != want {
			t.Errorf("StatusText(%d) = %q, want %q", code, got, want)
		}
	}
}
