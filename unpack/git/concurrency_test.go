package git_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/pktline"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testnet"
	"github.com/rukpak-dev/rukpak/unpack"
)

// The package's bounds on git fetches with a large ref advertisement.
const (
	maxGitFetches           = 4
	largeAdvertisementBytes = 256 << 10
)

// TestConcurrentFetchesBounded: servers that send a large ref
// advertisement and then stall hold what they sent until the fetch's
// deadline (ten such fetches held 510 MiB, an outside review found), so at
// most maxGitFetches fetches read an advertisement past
// largeAdvertisementBytes at once; the others wait and, if their deadline
// comes first, say what they waited for.
func TestConcurrentFetchesBounded(t *testing.T) {
	const n = maxGitFetches + 3
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		advertise(w, 2*largeAdvertisementBytes/60)
		w.(http.Flusher).Flush()
		<-release // stall: no flush-pkt, the connection stays open
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })

	u := unpacker(t, unpack.Limits{FetchTimeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	errs := make([]error, n)
	var done sync.WaitGroup
	for i := range n {
		src := rukpakv1alpha1.GitSource{Repository: fmt.Sprintf("%s/org/r%d", srv.URL, i), Ref: rukpakv1alpha1.GitRef{Branch: "main"}}
		b := bundle(src)
		b.Name = fmt.Sprintf("b%d", i)
		done.Add(1)
		go func() { defer done.Done(); _, errs[i] = u.Unpack(ctx, b) }()
	}
	done.Wait()
	waited := 0
	for _, err := range errs {
		if err != nil && strings.Contains(err.Error(), fmt.Sprintf("waiting for one of the %d git fetches with a ref advertisement over 256 KiB that run at once to finish", maxGitFetches)) {
			waited++
		}
	}
	if waited != n-maxGitFetches {
		t.Errorf("%d fetches report waiting for a slot, want %d: %v", waited, n-maxGitFetches, errs)
	}
}

// TestStalledFetchesDoNotBlockOthers: servers that accept a connection and
// never answer hold no slot, so however many Bundles point at them, a
// healthy repository is fetched at once (an outside review found four of
// them blocking every git fetch of the process until their deadline).
func TestStalledFetchesDoNotBlockOthers(t *testing.T) {
	const timeout = 3 * time.Second
	f := newFixture(t)
	hole := testnet.Blackhole(t)
	u := unpacker(t, unpack.Limits{FetchTimeout: timeout})
	var wg sync.WaitGroup
	for i := range 2 * maxGitFetches {
		b := bundle(rukpakv1alpha1.GitSource{Repository: fmt.Sprintf("http://%s/org/r%d", hole, i), Ref: rukpakv1alpha1.GitRef{Branch: "main"}})
		b.Name = fmt.Sprintf("stalled-%d", i)
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = u.Unpack(context.Background(), b) }()
	}
	defer wg.Wait()
	time.Sleep(200 * time.Millisecond)
	b := bundle(rukpakv1alpha1.GitSource{Repository: f.http.URL + "/org/bundles", Ref: rukpakv1alpha1.GitRef{Branch: "main"}})
	b.Name = "healthy"
	res, err := u.Unpack(context.Background(), b)
	if err != nil {
		t.Fatalf("a healthy repository beside %d stalled fetches: %v", 2*maxGitFetches, err)
	}
	_ = res.Close()
}

// advertise writes the head of a ref advertisement and refs branches
// (without end when refs < 0, until a write fails), not its closing
// flush-pkt.
func advertise(w http.ResponseWriter, refs int) {
	w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
	e := pktline.NewEncoder(w)
	_ = e.EncodeString("# service=git-upload-pack\n")
	_ = e.Flush()
	_ = e.EncodeString(strings.Repeat("1", 40) + " HEAD\x00ofs-delta\n")
	for i := 0; refs < 0 || i < refs; i++ {
		if e.EncodeString(fmt.Sprintf("%040x refs/heads/branch-%d\n", i, i)) != nil {
			return
		}
	}
}
