// Package freelist keeps a few idle values of one kind across garbage
// collections.
//
// A sync.Pool is emptied by every collection (what it held survives one,
// as its victim), and the provisioner collects every few tens of
// megabytes while it installs: pooled compressors (~1 MiB of tables each)
// and large buffers were made again after most collections, several
// megabytes per collection while installing a fleet of operators. A List
// keeps at most its size idle, whatever the collector does, and lets the
// rest go: its size times a value's is what it holds when idle.
package freelist

// List is a bounded free list. Its zero value is not usable: see New.
type List[T any] struct {
	idle  chan T
	fresh func() T
}

// New returns a List keeping up to size idle values, making new ones with
// fresh when none is idle.
func New[T any](size int, fresh func() T) *List[T] {
	return &List[T]{idle: make(chan T, size), fresh: fresh}
}

// Get returns an idle value, or a new one.
func (l *List[T]) Get() T {
	select {
	case v := <-l.idle:
		return v
	default:
		return l.fresh()
	}
}

// Put keeps v for a later Get if fewer than the list's size are idle, and
// otherwise lets it go. v must hold nothing the next user may not see.
func (l *List[T]) Put(v T) {
	select {
	case l.idle <- v:
	default:
	}
}
