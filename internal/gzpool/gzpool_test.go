package gzpool

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
)

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A reused reader reads each stream as a new one would, checks each
// stream's CRC, and refuses what is not gzip.
func TestReuse(t *testing.T) {
	for i, s := range []string{"first", strings.Repeat("second ", 10000), "", "fourth"} {
		zr, err := NewReader(bytes.NewReader(gz(t, s)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(zr)
		if err != nil || string(got) != s {
			t.Fatalf("stream %d: read %d bytes, %v", i, len(got), err)
		}
		Put(zr)
	}
	corrupt := gz(t, "payload")
	corrupt[len(corrupt)-8] ^= 0xff // the CRC
	zr, err := NewReader(bytes.NewReader(corrupt))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(zr); err == nil {
		t.Error("a stream with a wrong CRC read without error")
	}
	Put(zr)
	// A reader whose Reset failed goes back to the pool, usable: the next
	// stream reads whole.
	for range 3 {
		if _, err := NewReader(strings.NewReader("not gzip")); err == nil {
			t.Error("a stream that is not gzip was accepted")
		}
		zr, err := NewReader(bytes.NewReader(gz(t, "after")))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := io.ReadAll(zr); err != nil || string(got) != "after" {
			t.Fatalf("after a refused stream: read %q, %v", got, err)
		}
		Put(zr)
	}
	Put(nil)
}

// Reading a stream with a pooled reader allocates no new 32 KiB window.
// Not parallel: it measures this process's allocation.
func TestReuseAllocatesLittle(t *testing.T) {
	data := gz(t, strings.Repeat("x", 1<<16))
	read := func() {
		zr, err := NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, zr); err != nil {
			t.Fatal(err)
		}
		Put(zr)
	}
	read()
	const runs = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		read()
	}
	runtime.ReadMemStats(&after)
	// A collection may empty the pool once or twice meanwhile.
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 8<<10 {
		t.Errorf("%d bytes allocated per stream read with a pooled reader, want under 8 KiB (a new reader's window is 32 KiB)", per)
	}
}
