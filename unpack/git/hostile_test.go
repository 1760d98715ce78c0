package git_test

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"context"
	"crypto/sha1" //nolint:gosec // git's object and pack hashes
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/pktline"
	"github.com/go-git/go-git/v5/plumbing/object"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/heapwatch"
	"github.com/rukpak-dev/rukpak/internal/testgit"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/git"
)

// scale multiplies the hostile inputs' sizes as the issue reported them (a
// 2 GiB zero blob, a 256 MiB error body): RUKPAK_HOSTILE_SCALE=10 measures
// the 10x targets. Unset (0), the tests use smaller inputs, still
// far over the limits, to stay fast.
func scale(t *testing.T) int64 {
	t.Helper()
	s := os.Getenv("RUKPAK_HOSTILE_SCALE")
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		t.Fatalf("RUKPAK_HOSTILE_SCALE=%q: want a positive integer", s)
	}
	return n
}

func unpacker(t *testing.T, limits unpack.Limits) unpack.Unpacker {
	t.Helper()
	return git.New(unpack.Config{Reader: fake.NewClientBuilder().Build(), Namespace: namespace, BaseDir: t.TempDir(), Limits: limits})
}

const mib = 1 << 20

// peakRSS is the process's resident-set high-water mark (VmHWM), in MiB,
// or -1 where /proc does not tell.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kb / 1024
			}
		}
	}
	return -1
}

// A commit holding a 2 GiB zero blob (2 MiB packed) outside the requested
// directory took the heap to 3 GiB while go-git indexed the pack. Its
// header is now refused before it is inflated.
func TestHugeZeroBlobOutsideDirectory(t *testing.T) {
	size := int64(256 * mib)
	if n := scale(t); n > 0 {
		size = 2 << 30 * n
	}
	zeroBlobCommit(t, size) // hash the blob before the clock starts
	srv := newPackServer(t, func() []packEntry { return zeroBlobCommit(t, size) })
	u := unpacker(t, unpack.Limits{})
	src := rukpakv1alpha1.GitSource{Repository: srv.URL + "/org/big", Directory: "manifests", Ref: rukpakv1alpha1.GitRef{Branch: "main"}}
	var err error
	peak, allocated, took := heapwatch.Measure(func() { _, err = u.Unpack(context.Background(), bundle(src)) })
	want := fmt.Sprintf(`fetching repository %q: an object of %d bytes exceeds the limit of %d bytes per file (--max-file-bytes)`,
		src.Repository, size, unpack.DefaultLimits.MaxFileBytes)
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
	if !unpack.IsTerminal(err) {
		t.Fatalf("error %q is not terminal", err)
	}
	t.Logf("zero blob of %d MiB (%d KiB packed): peak heap %d MiB, allocated %d MiB, %s; process peak RSS %d MiB",
		size/mib, srv.packBytes.Load()/1024, peak/mib, allocated/mib, took.Round(time.Millisecond), peakRSS())
	if peak > 64*mib {
		t.Fatalf("peak heap %d MiB refusing a %d MiB blob, want < 64 MiB", peak/mib, size/mib)
	}
}

// A git server answering 404 with a 256 MiB body allocated 2.3 GiB: go-git
// read the whole body into its error message, and the message into the
// Bundle's status.
func TestHugeErrorBody(t *testing.T) {
	size := 256 * mib * max(scale(t), 1)
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		n, _ := io.Copy(w, io.MultiReader(strings.NewReader("Not Found\n\x1b[31m"), io.LimitReader(repeatReader('A'), size)))
		sent.Store(n)
	}))
	t.Cleanup(srv.Close)
	u := unpacker(t, unpack.Limits{})
	src := rukpakv1alpha1.GitSource{Repository: srv.URL + "/org/missing", Ref: rukpakv1alpha1.GitRef{Branch: "main"}}
	var err error
	peak, allocated, took := heapwatch.Measure(func() { _, err = u.Unpack(context.Background(), bundle(src)) })
	// The status code, never the body.
	want := fmt.Sprintf("repository %q not found: repository not found: 404 Not Found", src.Repository)
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
	if !unpack.IsTerminal(err) {
		t.Fatalf("error %q is not terminal", err)
	}
	t.Logf("404 body of %d MiB: peak heap %d MiB, allocated %d MiB, %s; process peak RSS %d MiB",
		size/mib, peak/mib, allocated/mib, took.Round(time.Millisecond), peakRSS())
	if allocated > 64*mib {
		t.Fatalf("allocated %d MiB refusing a %d MiB error body, want < 64 MiB", allocated/mib, size/mib)
	}
}

// Packs that declare more than the limits allow are refused from their
// headers.
func TestHostilePacks(t *testing.T) {
	limits := unpack.Limits{MaxFileBytes: mib}
	base := []byte(strings.Repeat("base\n", 1000))
	tests := []struct {
		name    string
		limits  *unpack.Limits
		entries func() []packEntry
		want    string
	}{
		{name: "tree over the limit for trees", limits: &unpack.Limits{}, want: "a tree object of 17825792 bytes exceeds the limit of 16777216 bytes for commits, trees and tags",
			entries: func() []packEntry {
				return append(smallCommit(t), packEntry{typ: plumbing.TreeObject, size: 17 * mib, z: zeroZlib(17 * mib)})
			}},
		{name: "delta on a tree over the limit for trees", limits: &unpack.Limits{}, want: "a tree object of 17825792 bytes exceeds the limit of 16777216 bytes for commits, trees and tags",
			entries: func() []packEntry {
				// entry 1 is the root tree
				return append(smallCommit(t), deltaEntry(1, 0, 17*mib, copyOp(0, 1)))
			}},
		{name: "delta declaring a huge target", want: "an object of 21474836480 bytes exceeds the limit of 1048576 bytes per file (--max-file-bytes)",
			entries: func() []packEntry {
				return append(smallCommit(t), blobEntry(base), deltaEntry(4, int64(len(base)), 20<<30, copyOp(0, len(base))))
			}},
		{name: "delta chain expanding past twice the file limit", want: "a delta chain expands to more than 2097152 bytes (twice --max-file-bytes)",
			entries: func() []packEntry {
				e := append(smallCommit(t), packEntry{typ: plumbing.BlobObject, size: mib, z: zeroZlib(mib)})
				e = append(e, deltaEntry(4, mib, mib, copyOp(0, mib)))
				return append(e, deltaEntry(5, mib, mib, copyOp(0, mib)))
			}},
		{name: "more objects than the limit", want: "the pack holds 4000000 objects, more than the limit of 200000 (twice --max-bundle-files, at least 10000)",
			entries: func() []packEntry { return append(smallCommit(t), packEntry{count: 4_000_000}) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newPackServer(t, tc.entries)
			src := rukpakv1alpha1.GitSource{Repository: srv.URL + "/org/hostile", Directory: "manifests", Ref: rukpakv1alpha1.GitRef{Branch: "main"}}
			want := fmt.Sprintf("fetching repository %q: %s", src.Repository, tc.want)
			l := limits
			if tc.limits != nil {
				l = *tc.limits
			}
			assertErrExact(t, unpacker(t, l), bundle(src), want, true)
		})
	}
}

// The pack is counted on the wire: a repository bigger than MaxFetchBytes
// fails at that size, and a server's ref advertisement has a budget of its
// own.
func TestFetchBytesLimit(t *testing.T) {
	root := testgit.NewRoot(t)
	repo := root.NewRepo("org/big")
	repo.WriteFiles(map[string]string{"manifests/a.yaml": "a: 1\n", "data/random.bin": randomText(t, 2*mib)})
	repo.Commit("big")
	srv := root.ServeHTTP(testgit.HTTPOptions{})
	src := rukpakv1alpha1.GitSource{Repository: srv.RepoURL(repo.Name), Directory: "manifests", Ref: rukpakv1alpha1.GitRef{Branch: "main"}}
	assertErrExact(t, unpacker(t, unpack.Limits{MaxFetchBytes: 256 << 10}), bundle(src),
		fmt.Sprintf("fetching repository %q: download exceeds the limit of 262144 bytes (--max-fetch-bytes)", src.Repository), true)

	// The same repository within the limit unpacks.
	res, err := unpacker(t, unpack.Limits{MaxFetchBytes: 8 * mib}).Unpack(context.Background(), bundle(src))
	if err != nil {
		t.Fatalf("Unpack within the limit: %v", err)
	}
	_ = res.Close()

	// A ref advertisement without end.
	refs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		advertise(w, -1)
	}))
	t.Cleanup(refs.Close)
	src = rukpakv1alpha1.GitSource{Repository: refs.URL + "/org/refs", Ref: rukpakv1alpha1.GitRef{Branch: "main"}}
	var gotErr error
	peak, _, _ := heapwatch.Measure(func() { _, gotErr = unpacker(t, unpack.Limits{}).Unpack(context.Background(), bundle(src)) })
	want := fmt.Sprintf("fetching repository %q: the server's ref advertisement exceeds the limit of 16777216 bytes", src.Repository)
	if gotErr == nil || gotErr.Error() != want || !unpack.IsTerminal(gotErr) {
		t.Fatalf("error = %v, want terminal %q", gotErr, want)
	}
	t.Logf("endless ref advertisement: peak heap %d MiB", peak/mib)
}

// An object larger than MaxFileBytes anywhere in the commit fails the fetch
// from its header, with a real git server.
func TestObjectSizeLimit(t *testing.T) {
	root := testgit.NewRoot(t)
	repo := root.NewRepo("org/big")
	repo.WriteFiles(map[string]string{"manifests/a.yaml": "a: 1\n", "data/random.bin": randomText(t, 2*mib)})
	repo.Commit("big")
	srv := root.ServeHTTP(testgit.HTTPOptions{})
	src := rukpakv1alpha1.GitSource{Repository: srv.RepoURL(repo.Name), Directory: "manifests", Ref: rukpakv1alpha1.GitRef{Branch: "main"}}
	assertErrExact(t, unpacker(t, unpack.Limits{MaxFileBytes: mib}), bundle(src),
		fmt.Sprintf("fetching repository %q: an object of %d bytes exceeds the limit of %d bytes per file (--max-file-bytes)", src.Repository, 2*mib, mib), true)
}

// A server that accepts connections and never answers: every protocol
// returns at the fetch deadline, and when the caller cancels, and closes
// its connection (ssh ignored both and hung in its handshake forever).
func TestNeverAnsweringServers(t *testing.T) {
	key, err := testgit.NewClientKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	sshSecret := secret("ssh", map[string]string{"ssh-privatekey": string(key)})
	insecure := &rukpakv1alpha1.Authorization{InsecureSkipVerify: true}
	for _, proto := range []string{"http", "https", "ssh", "git"} {
		for _, mode := range []string{"deadline", "cancel"} {
			t.Run(proto+" "+mode, func(t *testing.T) {
				ln := newSilentListener(t)
				repository := proto + "://" + ln.addr + "/org/bundles"
				auth := insecure
				if proto == "ssh" {
					repository = "ssh://git@" + ln.addr + "/org/bundles"
					auth = &rukpakv1alpha1.Authorization{Secret: &rukpakv1alpha1.LocalObjectReference{Name: "ssh"}, InsecureSkipVerify: true}
				}
				limits := unpack.Limits{}
				ctx := context.Background()
				if mode == "deadline" {
					limits.FetchTimeout = 500 * time.Millisecond
				} else {
					var cancel context.CancelFunc
					ctx, cancel = context.WithCancel(ctx)
					time.AfterFunc(500*time.Millisecond, cancel)
				}
				u := git.New(unpack.Config{Reader: fake.NewClientBuilder().WithObjects(sshSecret).Build(), Namespace: namespace,
					BaseDir: t.TempDir(), Limits: limits})
				start := time.Now()
				_, err := u.Unpack(ctx, bundle(rukpakv1alpha1.GitSource{Repository: repository, Ref: rukpakv1alpha1.GitRef{Branch: "main"}, Auth: auth}))
				took := time.Since(start)
				want := fmt.Sprintf("fetching repository %q: not done within the fetch timeout of 500ms (--fetch-timeout): context deadline exceeded", repository)
				if mode == "cancel" {
					want = fmt.Sprintf("fetching repository %q: context canceled", repository)
				}
				if err == nil || err.Error() != want {
					t.Fatalf("error = %v, want %q", err, want)
				}
				if unpack.IsTerminal(err) {
					t.Fatalf("error %q is terminal, want retryable", err)
				}
				t.Logf("returned after %s", took.Round(time.Millisecond))
				if took > 3*time.Second {
					t.Fatalf("Unpack took %s, want it to return within a few seconds of the deadline", took)
				}
				if proto != "https" {
					ln.waitClosed(t, 2*time.Second)
				}
				// net/http finishes a TLS handshake it started even when
				// the request is gone, within TLSHandshakeTimeout (10s).
			})
		}
	}
}

// Credentials go only to the hosts their Secret names: the server never
// sees them otherwise.
func TestCredentialsStayWithTheirHosts(t *testing.T) {
	var seen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			seen.Add(1)
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	f := newFixture(t)
	key := string(f.ssh.ClientKeyPEM)
	_, sshPort, _ := net.SplitHostPort(f.ssh.Addr)
	basic := map[string]string{"username": "user", "password": "team-a-token"}
	u := newUnpacker(t,
		secretFor("unannotated", "", basic),
		secretFor("team-a", "git.team-a.example.com", basic),
		secretFor("other-port", "127.0.0.1:1", basic),
		secretFor("ssh-unannotated", "", map[string]string{"ssh-privatekey": key}),
		secretFor("ssh-port", "127.0.0.1:"+sshPort, map[string]string{"ssh-privatekey": key}),
	)
	auth := func(name string) *rukpakv1alpha1.Authorization {
		return &rukpakv1alpha1.Authorization{Secret: &rukpakv1alpha1.LocalObjectReference{Name: name}, InsecureSkipVerify: true}
	}
	host := fmt.Sprintf("127.0.0.1:%d", port)
	tests := []struct {
		name, repository, secret, want string
	}{
		{name: "no annotation", repository: srv.URL + "/org/bundles", secret: "unannotated",
			want: `auth Secret rukpak-system/unannotated does not say which hosts its credentials are for: annotate it with core.rukpak.io/allowed-hosts (for example "127.0.0.1")`},
		{name: "another team's host", repository: srv.URL + "/org/bundles", secret: "team-a",
			want: `auth Secret rukpak-system/team-a is not for host "` + host + `" (its core.rukpak.io/allowed-hosts annotation allows "git.team-a.example.com")`},
		{name: "another port", repository: srv.URL + "/org/bundles", secret: "other-port",
			want: `auth Secret rukpak-system/other-port is not for host "` + host + `" (its core.rukpak.io/allowed-hosts annotation allows "127.0.0.1:1")`},
		{name: "ssh without annotation", repository: f.ssh.RepoURL(f.repo.Name), secret: "ssh-unannotated",
			want: `auth Secret rukpak-system/ssh-unannotated does not say which hosts its credentials are for: annotate it with core.rukpak.io/allowed-hosts (for example "127.0.0.1")`},
		{name: "scp-like ssh address without port", repository: "git@127.0.0.1:org/bundles.git", secret: "ssh-port",
			want: `auth Secret rukpak-system/ssh-port is not for host "127.0.0.1" (its core.rukpak.io/allowed-hosts annotation allows "127.0.0.1:` + sshPort + `")`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertErrExact(t, u, bundle(rukpakv1alpha1.GitSource{Repository: tc.repository, Ref: rukpakv1alpha1.GitRef{Branch: "main"}, Auth: auth(tc.secret)}), tc.want, true)
		})
	}
	if n := seen.Load(); n != 0 {
		t.Fatalf("the server received credentials %d times", n)
	}

	// A Secret allowed for the exact host and port works.
	res, err := u.Unpack(context.Background(), bundle(rukpakv1alpha1.GitSource{Repository: f.ssh.RepoURL(f.repo.Name), Directory: "manifests",
		Ref: rukpakv1alpha1.GitRef{Branch: "main"}, Auth: auth("ssh-port")}))
	if err != nil {
		t.Fatalf("Unpack with a Secret for host and port: %v", err)
	}
	_ = res.Close()
}

func assertErrExact(t *testing.T, u unpack.Unpacker, b *rukpakv1alpha1.Bundle, want string, terminal bool) {
	t.Helper()
	res, err := u.Unpack(context.Background(), b)
	if err == nil {
		_ = res.Close()
		t.Fatalf("Unpack succeeded, want error %q", want)
	}
	if err.Error() != want {
		t.Fatalf("error = %q\nwant    %q", err, want)
	}
	if unpack.IsTerminal(err) != terminal {
		t.Fatalf("IsTerminal(%q) = %v, want %v", err, !terminal, terminal)
	}
}

func randomText(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = 'a' + byte(x%26)
	}
	return string(b)
}

// silentListener accepts connections and never writes to them.
type silentListener struct {
	addr   string
	open   atomic.Int32
	closed chan struct{}
}

func newSilentListener(t *testing.T) *silentListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silentListener{addr: ln.Addr().String(), closed: make(chan struct{}, 16)}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			s.open.Add(1)
			go func() {
				// Returns when the client closes its side.
				_, _ = io.Copy(io.Discard, c)
				s.open.Add(-1)
				s.closed <- struct{}{}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return s
}

// waitClosed fails unless the client closed every connection it opened.
func (s *silentListener) waitClosed(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for s.open.Load() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open %s after Unpack returned", s.open.Load(), within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// packEntry is one object of a crafted pack: its type and declared size,
// its zlib stream, and for an OFS delta the index of its base. count, when
// set, is a pack header's object count of a pack with no more entries.
type packEntry struct {
	hash  plumbing.Hash // of a commit, to advertise
	typ   plumbing.ObjectType
	size  int64
	z     io.Reader
	base  int
	count uint32
}

// packServer is a smart HTTP git server whose branch main points at the
// commit that is the first entry of a crafted pack, which it sends to any
// fetch.
type packServer struct {
	URL       string
	packBytes atomic.Int64
}

func newPackServer(t *testing.T, entries func() []packEntry) *packServer {
	t.Helper()
	p := &packServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := pktline.NewEncoder(w)
		if strings.HasSuffix(r.URL.Path, "/info/refs") {
			w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
			_ = e.EncodeString("# service=git-upload-pack\n")
			_ = e.Flush()
			_ = e.EncodeString(entries()[0].hash.String() + " refs/heads/main\x00ofs-delta shallow no-progress\n")
			_ = e.Flush()
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
		_ = e.Flush() // no shallow lines
		_ = e.EncodeString("NAK\n")
		n, _ := writePack(w, entries())
		p.packBytes.Store(n)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writePack writes entries as a version 2 pack with its trailing checksum.
func writePack(w io.Writer, entries []packEntry) (int64, error) {
	h := sha1.New() //nolint:gosec // git's pack checksum
	cw := &countWriter{w: io.MultiWriter(w, h)}
	count := uint32(len(entries))
	if n := len(entries); n > 0 && entries[n-1].count != 0 {
		count = entries[n-1].count
		entries = entries[:n-1]
	}
	var hdr [12]byte
	copy(hdr[:], "PACK")
	binary.BigEndian.PutUint32(hdr[4:], 2)
	binary.BigEndian.PutUint32(hdr[8:], count)
	if _, err := cw.Write(hdr[:]); err != nil {
		return cw.n, err
	}
	offsets := make([]int64, len(entries))
	for i, e := range entries {
		offsets[i] = cw.n
		typ := e.typ
		if _, err := cw.Write(objectHeader(typ, e.size)); err != nil {
			return cw.n, err
		}
		if typ == plumbing.OFSDeltaObject {
			if _, err := cw.Write(ofsOffset(offsets[i] - offsets[e.base])); err != nil {
				return cw.n, err
			}
		}
		if _, err := io.Copy(cw, e.z); err != nil {
			return cw.n, err
		}
	}
	_, err := w.Write(h.Sum(nil))
	return cw.n + 20, err
}

func objectHeader(typ plumbing.ObjectType, size int64) []byte {
	b := []byte{byte(typ)<<4 | byte(size&0x0f)}
	size >>= 4
	for size > 0 {
		b[len(b)-1] |= 0x80
		b = append(b, byte(size&0x7f))
		size >>= 7
	}
	return b
}

func ofsOffset(n int64) []byte {
	b := []byte{byte(n & 0x7f)}
	for n >>= 7; n > 0; n >>= 7 {
		n--
		b = append([]byte{0x80 | byte(n&0x7f)}, b...)
	}
	return b
}

func zlibBytes(data []byte) io.Reader {
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	_, _ = zw.Write(data)
	_ = zw.Close()
	return &buf
}

func varint(n int64) []byte {
	var b []byte
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// copyOps are delta instructions copying n bytes of the base at offset.
func copyOps(offset uint32, n int) []byte {
	var ops []byte
	for n > 0 {
		c := min(n, 8<<20)
		ops = append(ops, copyOp(offset, c)...)
		offset += uint32(c)
		n -= c
	}
	return ops
}

// copyOp is a delta instruction copying n bytes (less than 16 MiB) at offset.
func copyOp(offset uint32, n int) []byte {
	op := []byte{0x80}
	for i := range 4 {
		if v := byte(offset >> (8 * i)); v != 0 {
			op[0] |= 1 << i
			op = append(op, v)
		}
	}
	for i := range 3 {
		if v := byte(n >> (8 * i)); v != 0 {
			op[0] |= 0x10 << i
			op = append(op, v)
		}
	}
	return op
}

func deltaEntry(base int, baseSize, targetSize int64, ops []byte) packEntry {
	delta := append(append(varint(baseSize), varint(targetSize)...), ops...)
	return packEntry{typ: plumbing.OFSDeltaObject, size: int64(len(delta)), z: zlibBytes(delta), base: base}
}

func blobEntry(data []byte) packEntry {
	return packEntry{typ: plumbing.BlobObject, size: int64(len(data)), z: zlibBytes(data)}
}

// encoded returns o's canonical encoding and hash.
func encoded(t *testing.T, o interface {
	Encode(plumbing.EncodedObject) error
}, typ plumbing.ObjectType,
) ([]byte, plumbing.Hash) {
	t.Helper()
	obj := &plumbing.MemoryObject{}
	obj.SetType(typ)
	if err := o.Encode(obj); err != nil {
		t.Fatal(err)
	}
	r, err := obj.Reader()
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b, obj.Hash()
}

// commitWith returns the entries of a commit whose root tree holds root
// (sorted, before "manifests") and manifests/, which holds a.yaml and then
// manifests: commit, root tree, manifests tree, a.yaml.
func commitWith(t *testing.T, root, manifests []object.TreeEntry) []packEntry {
	t.Helper()
	manifest := []byte("a: 1\n")
	manifests = append([]object.TreeEntry{{Name: "a.yaml", Mode: filemode.Regular, Hash: plumbing.ComputeHash(plumbing.BlobObject, manifest)}}, manifests...)
	sub, subHash := encoded(t, &object.Tree{Entries: manifests}, plumbing.TreeObject)
	root = append(root, object.TreeEntry{Name: "manifests", Mode: filemode.Dir, Hash: subHash})
	rootTree, rootHash := encoded(t, &object.Tree{Entries: root}, plumbing.TreeObject)
	sig := object.Signature{Name: "test", Email: "test@example.com", When: time.Unix(0, 0).UTC()}
	commit, commitHash := encoded(t, &object.Commit{Author: sig, Committer: sig, Message: "hostile\n", TreeHash: rootHash}, plumbing.CommitObject)
	return []packEntry{
		{hash: commitHash, typ: plumbing.CommitObject, size: int64(len(commit)), z: zlibBytes(commit)},
		{typ: plumbing.TreeObject, size: int64(len(rootTree)), z: zlibBytes(rootTree)},
		{typ: plumbing.TreeObject, size: int64(len(sub)), z: zlibBytes(sub)},
		blobEntry(manifest),
	}
}

func smallCommit(t *testing.T) []packEntry { return commitWith(t, nil, nil) }

var (
	zeroHashes   = map[int64]plumbing.Hash{}
	zeroHashesMu sync.Mutex
)

// zeroBlobCommit is a commit with a blob of size zeros, big.bin, beside
// manifests/: the blob is real (hash and zlib stream), but only its
// compressed form is ever held.
func zeroBlobCommit(t *testing.T, size int64) []packEntry {
	big := []object.TreeEntry{{Name: "big.bin", Mode: filemode.Regular, Hash: zeroHash(size)}}
	return append(commitWith(t, big, nil), packEntry{typ: plumbing.BlobObject, size: size, z: zeroZlib(size)})
}

// zeroZlib is the zlib stream of size zero bytes, built from one
// compressed 1 MiB block repeated: deflate blocks ending in a sync flush
// are byte-aligned and refer only to their own output.
func zeroZlib(size int64) io.Reader {
	const block = 1 << 20
	var b, last bytes.Buffer
	fw, _ := flate.NewWriter(&b, flate.BestCompression)
	_, _ = fw.Write(make([]byte, block))
	_ = fw.Flush()
	lw, _ := flate.NewWriter(&last, flate.BestCompression)
	_, _ = lw.Write(make([]byte, size%block))
	_ = lw.Close()
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], uint32(size%65521)<<16|1) // adler32 of zeros
	return io.MultiReader(bytes.NewReader([]byte{0x78, 0xda}), &repeated{b: b.Bytes(), n: size / block}, &last, bytes.NewReader(sum[:]))
}

type repeated struct {
	b   []byte
	n   int64
	off int
}

func (r *repeated) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b[r.off:])
	r.off += n
	if r.off == len(r.b) {
		r.off = 0
		r.n--
	}
	return n, nil
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// The most memory a pack within the default limits can cost: a blob just
// under MaxFileBytes copied into the bundle, and two delta chains at twice
// MaxFileBytes interleaved so that go-git's base cache misses. A
// measurement for docs/security.md, run with RUKPAK_HOSTILE_SCALE set.
func TestLargestAcceptedPacks(t *testing.T) {
	if scale(t) == 0 {
		t.Skip("a measurement: set RUKPAK_HOSTILE_SCALE=1 to run it")
	}
	big := unpack.DefaultLimits.MaxFileBytes - mib
	tests := []struct {
		name    string
		entries func() []packEntry
	}{
		{name: "blob just under the file limit in the directory", entries: func() []packEntry {
			e := commitWith(t, nil, []object.TreeEntry{{Name: "big.bin", Mode: filemode.Regular, Hash: zeroHash(big)}})
			return append(e, packEntry{typ: plumbing.BlobObject, size: big, z: zeroZlib(big)})
		}},
		{name: "two interleaved delta chains at twice the file limit", entries: func() []packEntry {
			e := smallCommit(t)
			e = append(e, packEntry{typ: plumbing.BlobObject, size: big, z: zeroZlib(big)})   // 4: A0
			e = append(e, packEntry{typ: plumbing.BlobObject, size: big, z: zeroZlib(big)})   // 5: B0
			e = append(e, deltaEntry(4, big, big+1, append(copyOps(0, int(big)), 1, 'a')))    // 6: A1
			return append(e, deltaEntry(5, big, big+1, append(copyOps(0, int(big)), 1, 'b'))) // 7: B1
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			entries := tc.entries()
			srv := newPackServer(t, func() []packEntry { return entries })
			u := unpacker(t, unpack.Limits{})
			src := rukpakv1alpha1.GitSource{Repository: srv.URL + "/org/large", Directory: "manifests", Ref: rukpakv1alpha1.GitRef{Branch: "main"}}
			var err error
			var res *unpack.Result
			peak, allocated, took := heapwatch.Measure(func() { res, err = u.Unpack(context.Background(), bundle(src)) })
			if err != nil {
				t.Fatalf("Unpack: %v", err)
			}
			if res != nil {
				_ = res.Close()
			}
			t.Logf("%s: peak heap %d MiB, allocated %d MiB, %s; process peak RSS %d MiB", tc.name, peak/mib, allocated/mib, took.Round(time.Millisecond), peakRSS())
			if peak > 256*mib {
				t.Fatalf("peak heap %d MiB, want < 256 MiB", peak/mib)
			}
		})
	}
}

func zeroHash(size int64) plumbing.Hash {
	zeroHashesMu.Lock()
	defer zeroHashesMu.Unlock()
	h, ok := zeroHashes[size]
	if !ok {
		hasher := plumbing.NewHasher(plumbing.BlobObject, size)
		_, _ = io.Copy(hasher, io.LimitReader(repeatReader(0), size))
		h = hasher.Sum()
		zeroHashes[size] = h
	}
	return h
}

// serveGitDaemon serves the repositories under root over git:// with git
// daemon.
func serveGitDaemon(t *testing.T, root string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	_ = ln.Close()
	// git-daemon itself, not `git daemon`: the git wrapper runs it as a
	// child, so killing the wrapper left the daemon orphaned, listening and
	// holding whatever file descriptors (flock'd locks included) it inherited.
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	cmd := exec.Command(filepath.Join(strings.TrimSpace(string(execPath)), "git-daemon"), "--export-all", "--reuseaddr", "--base-path="+root,
		"--listen=127.0.0.1", "--port="+port, root)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting git daemon: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
			return "git://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("git daemon did not listen on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The git:// and ssh sessions are this package's own: refs, commits, tags,
// missing repositories and the download budget, against real servers.
func TestStreamProtocols(t *testing.T) {
	f := newFixture(t)
	big := f.repo
	big.Checkout("big")
	big.WriteFiles(map[string]string{"data/random.bin": randomText(t, 2*mib)})
	big.Commit("big")
	big.Checkout("main")
	daemon := serveGitDaemon(t, strings.TrimSuffix(f.repo.Dir, "/"+f.repo.Name))
	u := newUnpacker(t, secret("ssh", map[string]string{"ssh-privatekey": string(f.ssh.ClientKeyPEM), "ssh-knownhosts": f.ssh.KnownHosts}))
	limited := git.New(unpack.Config{Reader: fake.NewClientBuilder().WithObjects(
		secret("ssh", map[string]string{"ssh-privatekey": string(f.ssh.ClientKeyPEM), "ssh-knownhosts": f.ssh.KnownHosts})).Build(),
		Namespace: namespace, BaseDir: t.TempDir(), Limits: unpack.Limits{MaxFetchBytes: 256 << 10}})
	for _, proto := range []struct {
		name string
		url  func(repo string) string
		auth *rukpakv1alpha1.Authorization
	}{
		{name: "git", url: func(repo string) string { return daemon + "/" + repo }},
		{name: "ssh", url: f.ssh.RepoURL, auth: &rukpakv1alpha1.Authorization{Secret: &rukpakv1alpha1.LocalObjectReference{Name: "ssh"}}},
	} {
		t.Run(proto.name, func(t *testing.T) {
			url := proto.url(f.repo.Name)
			for _, tc := range []struct {
				ref        rukpakv1alpha1.GitRef
				wantCommit string
			}{
				{ref: rukpakv1alpha1.GitRef{Branch: "main"}, wantCommit: f.third},
				{ref: rukpakv1alpha1.GitRef{Tag: "v1"}, wantCommit: f.first},
				{ref: rukpakv1alpha1.GitRef{Commit: f.hidden}, wantCommit: f.hidden},
				{ref: rukpakv1alpha1.GitRef{Commit: f.second[:8]}, wantCommit: f.second},
			} {
				res, err := u.Unpack(context.Background(), bundle(rukpakv1alpha1.GitSource{Repository: url, Directory: "manifests", Ref: tc.ref, Auth: proto.auth}))
				if err != nil {
					t.Fatalf("Unpack %+v: %v", tc.ref, err)
				}
				if got := res.ResolvedSource.Git.Ref.Commit; got != tc.wantCommit {
					t.Fatalf("Unpack %+v resolved %s, want %s", tc.ref, got, tc.wantCommit)
				}
				_ = res.Close()
			}
			missing := proto.url("org/missing")
			assertErr(t, u, bundle(rukpakv1alpha1.GitSource{Repository: missing, Ref: rukpakv1alpha1.GitRef{Branch: "main"}, Auth: proto.auth}),
				fmt.Sprintf("repository %q not found", missing), true)
			assertErrExact(t, limited, bundle(rukpakv1alpha1.GitSource{Repository: url, Directory: "manifests", Ref: rukpakv1alpha1.GitRef{Branch: "big"}, Auth: proto.auth}),
				fmt.Sprintf("fetching repository %q: download exceeds the limit of 262144 bytes (--max-fetch-bytes)", url), true)
		})
	}
}
