package httpsrc_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rukpak-dev/rukpak/internal/heapwatch"
	"github.com/rukpak-dev/rukpak/internal/testnet"
	"github.com/rukpak-dev/rukpak/unpack"
)

// paxNameTar is an archive of one file whose name is written in a PAX
// record by hand: archive/tar.Writer refuses records over 1 MiB.
func paxNameTar(name string) []byte {
	rec := " path=" + name + "\n"
	for n := len(rec) + 1; ; n++ { // the record's length counts its own digits
		if l := fmt.Sprintf("%d%s", n, rec); len(l) == n {
			rec = l
			break
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "pax", Typeflag: tar.TypeReg, Size: int64(len(rec)), Mode: 0o644})
	_, _ = io.WriteString(tw, rec)
	_ = tw.WriteHeader(&tar.Header{Name: "placeholder", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644})
	_, _ = io.WriteString(tw, "x")
	_ = tw.Close()
	data := buf.Bytes()
	hdr := data[:512]
	hdr[156] = tar.TypeXHeader
	copy(hdr[148:156], "        ")
	var sum int
	for _, b := range hdr {
		sum += int(b)
	}
	copy(hdr[148:156], fmt.Sprintf("%06o\x00 ", sum))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(data)
	_ = zw.Close()
	return gz.Bytes()
}

// streamArchive writes a gzip tar of files of fileSize incompressible bytes
// until total bytes are sent or the client goes away.
func streamArchive(fileSize, total int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cw := &countingWriter{w: w}
		zw, _ := gzip.NewWriterLevel(cw, gzip.NoCompression)
		tw := tar.NewWriter(zw)
		rng := rand.NewChaCha8([32]byte{})
		chunk := make([]byte, 256<<10)
		for i := 0; cw.n < total && r.Context().Err() == nil; i++ {
			if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("manifests/f%05d", i), Typeflag: tar.TypeReg, Mode: 0o644, Size: fileSize}); err != nil {
				return
			}
			for left := fileSize; left > 0; left -= int64(len(chunk)) {
				_, _ = rng.Read(chunk)
				if _, err := tw.Write(chunk[:min(left, int64(len(chunk)))]); err != nil {
					return
				}
			}
		}
	}
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// manyLongNames streams a gzip tar of 100,000 empty files with 1,000-byte
// names.
func manyLongNames(w http.ResponseWriter, _ *http.Request) {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	pad := strings.Repeat("n", 980)
	for i := range 100_000 {
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("manifests/%06d-%s", i, pad), Typeflag: tar.TypeReg, Mode: 0o644}); err != nil {
			return
		}
	}
	_ = tw.Close()
	_ = zw.Close()
}

// TestHostileArchives10x measures what the hostile http sources and
// archives of issue 11 cost, scaled ten times, for docs/security.md. The
// archive checks are the unpack tree's, shared by every source. Opt in:
//
//	RUKPAK_HOSTILE_10X=1 go test -count=1 -run TestHostileArchives10x -v ./unpack/httpsrc/
func TestHostileArchives10x(t *testing.T) {
	if os.Getenv("RUKPAK_HOSTILE_10X") == "" {
		t.Skip("set RUKPAK_HOSTILE_10X=1 to measure")
	}
	const body = 2560 << 20 // 2.5 GiB
	blackhole := testnet.Blackhole(t)
	deep1x := paxNameTar(strings.Repeat("a/", 63_999) + "a")
	deep10x := paxNameTar(strings.Repeat("a/", 639_999) + "a")
	mux := http.NewServeMux()
	mux.HandleFunc("/deep1x.tgz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(deep1x) })
	mux.HandleFunc("/deep10x.tgz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(deep10x) })
	mux.HandleFunc("/names.tgz", manyLongNames)
	mux.HandleFunc("/declared.tgz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(body))
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/body.tgz", streamArchive(32<<20, body))
	mux.HandleFunc("/padded.tgz", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(tarGz(t, map[string]string{"manifests/a.yaml": "a"}))
		zeros := make([]byte, 1<<20)
		for sent := 0; sent < body && r.Context().Err() == nil; sent += len(zeros) {
			if _, err := w.Write(zeros); err != nil {
				return
			}
		}
	})
	srv := server(t, false, nil)
	srv.Config.Handler = mux
	big := unpack.Limits{MaxBytes: 4 << 30, MaxFileBytes: 4 << 30}

	for _, tc := range []struct {
		name, url string
		limits    unpack.Limits
	}{
		{name: "64,000-level path (1x)", url: srv.URL + "/deep1x.tgz"},
		{name: "640,000-level path (10x)", url: srv.URL + "/deep10x.tgz"},
		{name: "100,000 files with 1,000-byte names", url: srv.URL + "/names.tgz"},
		{name: "2.5 GiB body, declared", url: srv.URL + "/declared.tgz"},
		{name: "2.5 GiB body, chunked archive of 32 MiB files", url: srv.URL + "/body.tgz"},
		{name: "2.5 GiB body, chunked, content limits raised to 4 GiB", url: srv.URL + "/body.tgz", limits: big},
		{name: "small archive followed by 2.5 GiB", url: srv.URL + "/padded.tgz"},
		{name: "server accepting and never answering (fetch timeout 5s)", url: "http://" + blackhole + "/x.tgz", limits: unpack.Limits{FetchTimeout: 5 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUnpacker(t, tc.limits)
			runtime.GC()
			stop := heapwatch.Start()
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			start := time.Now()
			_, err := u.Unpack(t.Context(), bundleFor(tc.url, "", false))
			elapsed := time.Since(start)
			runtime.ReadMemStats(&ms1)
			peak := stop()
			if err == nil {
				t.Fatal("unpacked a hostile archive")
			}
			t.Logf("| %s | %s | peak heap +%.1f MiB, allocated %.1f MiB | %s | terminal=%v",
				tc.name, err, float64(peak)/(1<<20), float64(ms1.TotalAlloc-ms0.TotalAlloc)/(1<<20), elapsed.Round(time.Millisecond), unpack.IsTerminal(err))
		})
	}
}
