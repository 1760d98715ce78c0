package bundle

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
)

// unpackerFunc adapts a function to unpack.Unpacker.
type unpackerFunc func(ctx context.Context, b *rukpakv1alpha1.Bundle) (*unpack.Result, error)

func (f unpackerFunc) Unpack(ctx context.Context, b *rukpakv1alpha1.Bundle) (*unpack.Result, error) {
	return f(ctx, b)
}

// wait takes the finished fetch of b, polling as the reconciler would on
// each queued event.
func wait(t *testing.T, f *fetches, u unpack.Unpacker, b *rukpakv1alpha1.Bundle) (*unpack.Result, error) {
	t.Helper()
	select {
	case <-f.events:
	case <-time.After(10 * time.Second):
		t.Fatal("no event for the finished fetch")
	}
	res, err, done := f.poll(context.Background(), u, b)
	if !done {
		t.Fatal("the fetch is not done after its event")
	}
	return res, err
}

func testBundle(name string, gen int64) *rukpakv1alpha1.Bundle {
	return &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid-" + "1", Generation: gen}}
}

func TestFetchesOutcomes(t *testing.T) {
	closed := atomic.Int32{}
	result := func() *unpack.Result {
		return unpack.Unpacked(fstest.MapFS{}, nil, func() error { closed.Add(1); return nil })
	}
	tests := []struct {
		name     string
		timeout  time.Duration
		unpack   func(ctx context.Context) (*unpack.Result, error)
		wantErr  string
		terminal bool
	}{
		{name: "success", unpack: func(context.Context) (*unpack.Result, error) { return result(), nil }},
		{name: "error", unpack: func(context.Context) (*unpack.Result, error) { return nil, errors.New("boom") }, wantErr: "boom"},
		{name: "panic becomes a terminal error", unpack: func(context.Context) (*unpack.Result, error) { panic("hostile input") },
			wantErr: "unpacking panicked: hostile input", terminal: true},
		{name: "deadline named", timeout: 50 * time.Millisecond, unpack: func(ctx context.Context) (*unpack.Result, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, wantErr: "fetching the source did not finish within 50ms: context deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFetches(tt.timeout)
			u := unpackerFunc(func(ctx context.Context, _ *rukpakv1alpha1.Bundle) (*unpack.Result, error) { return tt.unpack(ctx) })
			b := testBundle("b", 1)
			if _, _, done := f.poll(context.Background(), u, b); done {
				t.Fatal("first poll is done: the fetch must run in the background")
			}
			res, err := wait(t, f, u, b)
			if tt.wantErr == "" {
				if err != nil || res == nil || res.State != unpack.StateUnpacked {
					t.Fatalf("got %v, %v", res, err)
				}
				_ = res.Close()
			} else if err == nil || err.Error() != tt.wantErr || unpack.IsTerminal(err) != tt.terminal {
				t.Fatalf("got %v (terminal %v), want %q (terminal %v)", err, unpack.IsTerminal(err), tt.wantErr, tt.terminal)
			}
			if f.inFlight() != 0 {
				t.Fatalf("%d fetches left after the result was taken", f.inFlight())
			}
		})
	}
}

// TestFetchesCancel: cancelling (deletion) stops the fetch, and a result
// nobody takes any more is closed; a new generation supersedes the old
// fetch.
func TestFetchesCancel(t *testing.T) {
	var closed atomic.Int32
	started := make(chan struct{}, 2)
	u := unpackerFunc(func(ctx context.Context, _ *rukpakv1alpha1.Bundle) (*unpack.Result, error) {
		started <- struct{}{}
		<-ctx.Done()
		return unpack.Unpacked(fstest.MapFS{}, nil, func() error { closed.Add(1); return nil }), nil
	})
	f := newFetches(time.Hour)
	b := testBundle("b", 1)
	_, _, _ = f.poll(context.Background(), u, b)
	<-started
	f.cancel("b")
	deadline := time.Now().Add(10 * time.Second)
	for closed.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the cancelled fetch's result was not closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if f.inFlight() != 0 {
		t.Fatalf("%d fetches after cancel", f.inFlight())
	}

	_, _, _ = f.poll(context.Background(), u, b)
	<-started
	_, _, _ = f.poll(context.Background(), u, testBundle("b", 2)) // supersedes generation 1
	deadline = time.Now().Add(10 * time.Second)
	for closed.Load() != 2 {
		if time.Now().After(deadline) {
			t.Fatal("the superseded fetch's result was not closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if f.inFlight() != 1 {
		t.Fatalf("%d fetches, want the new generation's", f.inFlight())
	}
	f.cancel("b")
}

// TestFetchesBackOff: a fetch that failed is not started again before its
// backoff, doubled after each failure in a row (a registry refusing
// connections was fetched some 150 times a second, an outside review
// found); a new generation is fetched at once, and so is a Bundle created
// again after a deletion.
func TestFetchesBackOff(t *testing.T) {
	var calls atomic.Int32
	u := unpackerFunc(func(context.Context, *rukpakv1alpha1.Bundle) (*unpack.Result, error) {
		calls.Add(1)
		return nil, errors.New("connection refused")
	})
	f := newFetches(time.Minute)
	b := testBundle("b", 1)
	fail := func(want int32) {
		t.Helper()
		if _, _, done := f.poll(context.Background(), u, b); done {
			t.Fatal("a started fetch is done at once")
		}
		if _, err := wait(t, f, u, b); err == nil {
			t.Fatal("the fetch did not fail")
		}
		if got := calls.Load(); got != want {
			t.Fatalf("%d fetches, want %d", got, want)
		}
	}
	fail(1)
	for range 3 {
		if _, _, done := f.poll(context.Background(), u, b); done {
			t.Fatal("done without a fetch")
		}
	}
	if got := calls.Load(); got != 1 {
		t.Fatalf("polls during the backoff started %d more fetches", got-1)
	}
	if w := f.retryIn(b); w <= 0 || w > retryBackoff {
		t.Fatalf("retryIn after a first failure = %s, want (0, %s]", w, retryBackoff)
	}
	time.Sleep(f.retryIn(b))
	fail(2)
	if w := f.retryIn(b); w <= retryBackoff || w > 2*retryBackoff {
		t.Fatalf("retryIn after a second failure = %s, want (%s, %s]", w, retryBackoff, 2*retryBackoff)
	}

	// A new generation is fetched at once.
	b = testBundle("b", 2)
	if w := f.retryIn(b); w != 0 {
		t.Fatalf("retryIn of a new generation = %s", w)
	}
	fail(3)
	// Deleted (cancel) and created again: at once too.
	f.cancel("b")
	if w := f.retryIn(b); w != 0 {
		t.Fatalf("retryIn after a deletion = %s", w)
	}
	fail(4)
}

// TestSameCached: Bundles of one pinned image share its cached tree
// whatever else their sources say, so deleting one keeps it for the other.
func TestSameCached(t *testing.T) {
	img := func(ref, secret string) *rukpakv1alpha1.BundleSource {
		return &rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: ref, ImagePullSecretName: secret}}
	}
	const pinned = "registry.example.com/app@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name string
		a, b *rukpakv1alpha1.BundleSource
		want bool
	}{
		{"same image, other pull secret", img(pinned, "a"), img(pinned, "b"), true},
		{"other repository", img(pinned, ""), img("registry.example.com/other@sha256:"+pinned[len(pinned)-64:], ""), false},
		{"git sources compared whole", &rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit, Git: &rukpakv1alpha1.GitSource{Repository: "r"}},
			&rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit, Git: &rukpakv1alpha1.GitSource{Repository: "r", Directory: "d"}}, false},
		{"nil", nil, img(pinned, ""), false},
	} {
		if got := sameCached(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: sameCached = %v, want %v", tc.name, got, tc.want)
		}
	}
}
