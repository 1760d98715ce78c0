package unpack

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestLimitReader(t *testing.T) {
	errBig := errors.New("too large")
	tooLarge := func(int64) error { return errBig }
	for _, tc := range []struct {
		name    string
		in      io.Reader
		limit   int64
		want    string
		wantErr error
	}{
		{name: "under", in: strings.NewReader("abc"), limit: 4, want: "abc"},
		{name: "exactly the limit", in: strings.NewReader("abcd"), limit: 4, want: "abcd"},
		{name: "one byte over", in: strings.NewReader("abcde"), limit: 4, wantErr: errBig},
		{name: "one byte at a time, over", in: iotest.OneByteReader(strings.NewReader("abcde")), limit: 4, wantErr: errBig},
		{name: "empty", in: strings.NewReader(""), limit: 0, want: ""},
		{name: "zero limit, one byte", in: strings.NewReader("a"), limit: 0, wantErr: errBig},
		{name: "endless", in: endless{}, limit: 1 << 20, wantErr: errBig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := io.ReadAll(LimitReader(tc.in, tc.limit, tooLarge))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && string(got) != tc.want {
				t.Errorf("read %q, want %q", got, tc.want)
			}
			if int64(len(got)) > tc.limit {
				t.Errorf("read %d bytes past a limit of %d", len(got), tc.limit)
			}
		})
	}
}

type endless struct{}

func (endless) Read(p []byte) (int, error) { return len(p), nil }
