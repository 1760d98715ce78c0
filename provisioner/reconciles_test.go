package provisioner_test

import (
	"strings"
	"sync"

	"github.com/go-logr/logr"
)

// reconcileCounts counts, by controller, the reconciles one harness's
// managers finished without error. controller-runtime's own count
// (controller_runtime_reconcile_total) is process-wide, shared by the
// managers of every test running in parallel, so it cannot tell whether
// this test's provisioner reconciled.
type reconcileCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *reconcileCounts) add(controller string) {
	c.mu.Lock()
	c.n[controller]++
	c.mu.Unlock()
}

func (c *reconcileCounts) get(controller string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[controller]
}

// successful reports how many reconciles controller of this harness
// finished without error, restarts included.
func (h *harness) successful(controller string) int { return h.reconciles.get(controller) }

// failed reports how many reconciles controller of this harness returned
// an error for (each is retried with controller-runtime's backoff).
func (h *harness) failed(controller string) int { return h.reconciles.get(controller + failedSuffix) }

// reconcileErrorMsg is what controller-runtime logs, as an error, for a
// reconcile that returned one (internal/controller's reconcileHandler).
const (
	reconcileErrorMsg = "Reconciler error"
	failedSuffix      = "/failed"
)

// reconcileDoneLevel is the verbosity at which controller-runtime logs the
// end of a reconcile that returned no error: "Reconcile successful", or
// "Reconcile done, requeueing..." (internal/controller's reconcileHandler).
const reconcileDoneLevel = 5

// countingSink is a manager's log sink: it counts the reconciles its
// controllers report done (their loggers carry the "controller" value) and
// passes everything its delegate (nil: discard) wants on.
type countingSink struct {
	delegate   logr.LogSink
	counts     *reconcileCounts
	controller string
}

func (s *countingSink) Init(info logr.RuntimeInfo) {
	if s.delegate != nil {
		s.delegate.Init(info)
	}
}

func (s *countingSink) Enabled(level int) bool {
	return level == reconcileDoneLevel || (s.delegate != nil && s.delegate.Enabled(level))
}

func (s *countingSink) Info(level int, msg string, kv ...any) {
	if level == reconcileDoneLevel && s.controller != "" && (msg == "Reconcile successful" || strings.HasPrefix(msg, "Reconcile done")) {
		s.counts.add(s.controller)
	}
	if s.delegate != nil && s.delegate.Enabled(level) {
		s.delegate.Info(level, msg, kv...)
	}
}

func (s *countingSink) Error(err error, msg string, kv ...any) {
	if s.controller != "" && msg == reconcileErrorMsg {
		s.counts.add(s.controller + failedSuffix)
	}
	if s.delegate != nil {
		s.delegate.Error(err, msg, kv...)
	}
}

func (s *countingSink) WithValues(kv ...any) logr.LogSink {
	out := *s
	for i := 0; i+1 < len(kv); i += 2 {
		if k, ok := kv[i].(string); ok && k == "controller" {
			out.controller, _ = kv[i+1].(string)
		}
	}
	if s.delegate != nil {
		out.delegate = s.delegate.WithValues(kv...)
	}
	return &out
}

func (s *countingSink) WithName(name string) logr.LogSink {
	out := *s
	if s.delegate != nil {
		out.delegate = s.delegate.WithName(name)
	}
	return &out
}
