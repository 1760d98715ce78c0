// Package lazylog defers a logger's names and values until it logs.
//
// controller-runtime gives every reconcile a logger carrying its request
// (controller, kind, namespace, name, reconcile ID), and zap encodes those
// values the moment they are added: a cloned encoder and a reflected
// encoding of the object reference, ~12 KB per reconcile, although most
// reconciles log nothing (a restart of 10,000 BundleDeployments allocated
// 250 MB there). A logger from New keeps the names and values as given and
// hands them to the underlying sink only for a line it writes.
package lazylog

import (
	"slices"
	"sync"

	"github.com/go-logr/logr"
)

// New returns l, deferring WithName and WithValues until a line is
// written. Lines read the same, with the same caller.
func New(l logr.Logger) logr.Logger {
	base := l.GetSink()
	if base == nil {
		return l
	}
	// One frame more between the caller and the sink: this package's.
	if cd, ok := base.(logr.CallDepthLogSink); ok {
		base = cd.WithCallDepth(1)
	}
	return logr.New(&sink{base: base}).V(l.GetV())
}

// A sink's values are kept as given and encoded when its first line is
// written: they must not change after WithValues (the loggers here are
// given strings, names and object references).
type sink struct {
	base   logr.LogSink
	names  []string
	values []any

	// full is base with names and values, made for the first line and
	// kept for the next ones.
	once sync.Once
	full logr.LogSink
}

var _ logr.CallDepthLogSink = (*sink)(nil)

// Init is the base's, already done by the logger it came from.
func (s *sink) Init(logr.RuntimeInfo) {}

func (s *sink) Enabled(level int) bool { return s.base.Enabled(level) }

func (s *sink) Info(level int, msg string, keysAndValues ...any) {
	s.materialize().Info(level, msg, keysAndValues...)
}

func (s *sink) Error(err error, msg string, keysAndValues ...any) {
	s.materialize().Error(err, msg, keysAndValues...)
}

// WithValues copies what s has: two loggers derived from one never share
// a slice they append to.
func (s *sink) WithValues(keysAndValues ...any) logr.LogSink {
	return &sink{base: s.base, names: s.names, values: slices.Concat(s.values, keysAndValues)}
}

func (s *sink) WithName(name string) logr.LogSink {
	return &sink{base: s.base, names: slices.Concat(s.names, []string{name}), values: s.values}
}

func (s *sink) WithCallDepth(depth int) logr.LogSink {
	base := s.base
	if cd, ok := base.(logr.CallDepthLogSink); ok {
		base = cd.WithCallDepth(depth)
	}
	return &sink{base: base, names: s.names, values: s.values}
}

// materialize is the base sink with s's names and values: names go
// before values, which a logger shows apart from each other whatever the
// order they were added in.
func (s *sink) materialize() logr.LogSink {
	s.once.Do(func() {
		b := s.base
		for _, n := range s.names {
			b = b.WithName(n)
		}
		if len(s.values) > 0 {
			b = b.WithValues(s.values...)
		}
		s.full = b
	})
	return s.full
}
