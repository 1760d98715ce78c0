package git_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/pktline"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
)

// maxGitFetches is the package's bound on git fetches running at once.
const maxGitFetches = 4

// TestConcurrentFetchesBounded: servers that send a large ref
// advertisement and then stall hold what they sent until the fetch's
// deadline, so at most maxGitFetches fetches run at once in the process
// (ten such fetches held 510 MiB, an outside review found); the others
// wait and, if their deadline comes first, say what they waited for.
func TestConcurrentFetchesBounded(t *testing.T) {
	const n = maxGitFetches + 3
	var inFlight, most atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		now := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
		}
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		e := pktline.NewEncoder(w)
		_ = e.EncodeString("# service=git-upload-pack\n")
		_ = e.Flush()
		_ = e.EncodeString(strings.Repeat("1", 40) + " HEAD\x00ofs-delta\n")
		for i := range 2000 {
			_ = e.EncodeString(fmt.Sprintf("%040x refs/heads/b-%d\n", i, i))
		}
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
	if got := most.Load(); got != maxGitFetches {
		t.Errorf("%d fetches reached the server at once, want %d", got, maxGitFetches)
	}
	waited := 0
	for _, err := range errs {
		if err != nil && strings.Contains(err.Error(), fmt.Sprintf("waiting for one of the %d git fetches that run at once to finish", maxGitFetches)) {
			waited++
		}
	}
	if waited != n-maxGitFetches {
		t.Errorf("%d fetches report waiting for a slot, want %d: %v", waited, n-maxGitFetches, errs)
	}
}
