// Package backoff keeps, per object, how long the next attempt of a
// failing operation waits: failures in a row of one incarnation (UID) and
// generation double the wait from a base up to a maximum, and a success,
// a new incarnation or generation, or Forget starts over. Controllers use
// it where an attempt's own reconcile would otherwise forget the rate
// limit controller-runtime keeps for it (a reconcile that starts an
// attempt in the background returns no error).
package backoff

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Of names what failed: an object's incarnation and generation.
type Of struct {
	UID        types.UID
	Generation int64
}

// Failures is the failures in a row per object name. Not safe for
// concurrent use: its callers hold their own lock.
type Failures struct {
	Base, Max time.Duration
	entries   map[string]*entry
}

type entry struct {
	of      Of
	n       int
	retryAt time.Time
}

// Failed records a failure of name's of and returns how long its next
// attempt waits.
func (f *Failures) Failed(name string, of Of) time.Duration {
	if f.entries == nil {
		f.entries = map[string]*entry{}
	}
	e := f.entries[name]
	if e == nil || e.of != of {
		e = &entry{of: of}
		f.entries[name] = e
	}
	e.n++
	wait := f.Max
	if e.n < 32 {
		wait = min(f.Base<<(e.n-1), f.Max)
	}
	e.retryAt = time.Now().Add(wait)
	return wait
}

// Wait is how long name's next attempt still waits: zero when none
// failed, or the failures were of another incarnation or generation.
func (f *Failures) Wait(name string, of Of) time.Duration {
	e := f.entries[name]
	if e == nil || e.of != of {
		return 0
	}
	return max(time.Until(e.retryAt), 0)
}

// Forget starts name over: it succeeded, was deleted, or an input changed.
func (f *Failures) Forget(name string) { delete(f.entries, name) }
