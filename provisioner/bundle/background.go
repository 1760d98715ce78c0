package bundle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/backoff"
	"github.com/rukpak-dev/rukpak/unpack"
)

// fetches runs each Bundle's unpack in its own goroutine, outside the
// reconcile workers, under a deadline: a source that accepts a connection
// and never answers costs one goroutine until the deadline, never a worker,
// so every other Bundle of the class keeps reconciling. At most one fetch
// runs per Bundle; when it finishes the Bundle is queued again and the next
// reconcile takes the result. Deleting the Bundle (or recreating it, or a
// new generation) cancels its fetch. A fetch that failed is not started
// again before a backoff (doubled after each failure in a row of the same
// incarnation and generation, up to maxRetryBackoff): a source that fails
// at once (a registry refusing connections) was fetched again some 150
// times a second.
type fetches struct {
	timeout time.Duration
	// observe, when set, is told of every fetch that finished (in its
	// goroutine, before the result is handed over).
	observe func(b *rukpakv1alpha1.Bundle, took time.Duration, res *unpack.Result, err error)
	// events queues a Bundle whose fetch finished.
	events chan event.GenericEvent

	mu       sync.Mutex
	running  map[string]*fetch
	failures backoff.Failures
}

// Backoff between failed fetches of one Bundle.
const (
	retryBackoff    = 2 * time.Second
	maxRetryBackoff = 5 * time.Minute
)

// fetch is one Bundle's unpack in flight or finished.
type fetch struct {
	uid        types.UID
	generation int64
	started    time.Time
	cancel     context.CancelFunc
	done       bool
	res        *unpack.Result
	err        error
}

func newFetches(timeout time.Duration) *fetches {
	if timeout <= 0 {
		timeout = unpack.DefaultLimits.FetchTimeout
	}
	return &fetches{timeout: timeout, events: make(chan event.GenericEvent, 1024), running: map[string]*fetch{}, failures: backoff.Failures{Base: retryBackoff, Max: maxRetryBackoff}}
}

// source queues Bundles whose fetch finished, for a controller's
// WatchesRawSource.
func (f *fetches) source() source.Source {
	return source.Channel(f.events, &handler.EnqueueRequestForObject{})
}

// poll returns the finished unpack of b, or done=false while it runs or
// waits out its backoff (retryIn). A fetch is started when none runs for
// this incarnation and generation of b and no backoff is due. The caller
// owns a returned Result and must Close it.
func (f *fetches) poll(ctx context.Context, u unpack.Unpacker, b *rukpakv1alpha1.Bundle) (res *unpack.Result, err error, done bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := f.running[b.Name]
	if cur != nil && (cur.uid != b.UID || cur.generation != b.Generation) {
		f.dropLocked(b.Name)
		cur = nil
	}
	if cur == nil {
		if f.retryInLocked(b) <= 0 {
			f.startLocked(ctx, u, b)
		}
		return nil, nil, false
	}
	if !cur.done {
		return nil, nil, false
	}
	delete(f.running, b.Name)
	cur.cancel()
	f.noteLocked(b, cur.err)
	return cur.res, cur.err, true
}

// retryIn is how long b's next fetch waits for the backoff of its last
// failure (zero when none is due or a fetch runs).
func (f *fetches) retryIn(b *rukpakv1alpha1.Bundle) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running[b.Name] != nil {
		return 0
	}
	return f.retryInLocked(b)
}

func (f *fetches) retryInLocked(b *rukpakv1alpha1.Bundle) time.Duration {
	return f.failures.Wait(b.Name, backoff.Of{UID: b.UID, Generation: b.Generation})
}

// noteLocked records the outcome of b's fetch for the backoff.
func (f *fetches) noteLocked(b *rukpakv1alpha1.Bundle, err error) {
	if err == nil {
		f.failures.Forget(b.Name)
		return
	}
	f.failures.Failed(b.Name, backoff.Of{UID: b.UID, Generation: b.Generation})
}

// startLocked runs the unpack of a copy of b in the background. The fetch
// outlives the reconcile that started it (WithoutCancel) and is bounded by
// its own deadline and cancel func.
func (f *fetches) startLocked(ctx context.Context, u unpack.Unpacker, b *rukpakv1alpha1.Bundle) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.timeout)
	cur := &fetch{uid: b.UID, generation: b.Generation, started: time.Now(), cancel: cancel}
	f.running[b.Name] = cur
	b = b.DeepCopy()
	go func() {
		res, err := safeUnpack(fctx, u, b)
		if err != nil {
			if errors.Is(fctx.Err(), context.DeadlineExceeded) {
				// Retrying may help (the source may recover): not terminal.
				err = fmt.Errorf("fetching the source did not finish within %s: %w", f.timeout, err)
			}
			res = nil
		}
		if f.observe != nil {
			f.observe(b, time.Since(cur.started), res, err)
		}
		f.mu.Lock()
		current := f.running[b.Name] == cur
		if current {
			cur.done, cur.res, cur.err = true, res, err
		}
		f.mu.Unlock()
		if !current {
			// Cancelled or superseded: nobody will take the result.
			_ = res.Close()
			return
		}
		f.events <- event.GenericEvent{Object: b}
	}()
}

// safeUnpack turns a panic of an unpacker (on hostile input, say) into an
// error on the Bundle: outside a reconcile, nothing else would recover it
// and the whole process would crash.
func safeUnpack(ctx context.Context, u unpack.Unpacker, b *rukpakv1alpha1.Bundle) (res *unpack.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, unpack.Terminal(fmt.Errorf("unpacking panicked: %v", p))
		}
	}()
	return u.Unpack(ctx, b)
}

// age is how long name's fetch has been running (zero if none runs).
func (f *fetches) age(name string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur := f.running[name]; cur != nil && !cur.done {
		return time.Since(cur.started)
	}
	return 0
}

// cancel stops and forgets name's fetch, if any.
func (f *fetches) cancel(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropLocked(name)
	f.failures.Forget(name)
}

func (f *fetches) dropLocked(name string) {
	cur := f.running[name]
	if cur == nil {
		return
	}
	delete(f.running, name)
	cur.cancel()
	if cur.done {
		_ = cur.res.Close()
	}
}

// inFlight is the number of fetches running or waiting to be taken.
func (f *fetches) inFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.running)
}
