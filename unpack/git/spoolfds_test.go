package git_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
)

// TestPackSpoolHoldsFewFiles: a pack of k tiny blobs followed by k deltas
// on them has k bases waiting at once; their spooled contents are closed
// files, so the fetch holds a few descriptors, not k (50,000 in 1.7 MB of
// pack ran the process out of them, an outside review found).
func TestPackSpoolHoldsFewFiles(t *testing.T) {
	const k = 3_000
	blob := []byte("x")
	srv := newPackServer(t, func() []packEntry {
		e := smallCommit(t)
		first := len(e)
		for range k {
			e = append(e, blobEntry(blob))
		}
		for i := range k {
			e = append(e, deltaEntry(first+i, 1, 1, copyOp(0, 1)))
		}
		return e
	})
	open := func() int64 {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skipf("no /proc/self/fd: %v", err)
		}
		return int64(len(ents))
	}
	before := open()
	var peak atomic.Int64
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			if n := open(); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	src := rukpakv1alpha1.GitSource{Repository: srv.URL + "/org/fds", Directory: "manifests", Ref: rukpakv1alpha1.GitRef{Branch: "main"}}
	res, err := unpacker(t, unpack.Limits{}).Unpack(context.Background(), bundle(src))
	close(stop)
	<-stopped
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Close()
	if extra := peak.Load() - before; extra > 64 {
		t.Errorf("the fetch of a pack of %d bases waiting for their deltas held %d more descriptors at once", k, extra)
	}
}
