package lazylog

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

func zapLogger(w io.Writer) logr.Logger {
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{
		MessageKey: "msg", NameKey: "logger", CallerKey: "caller", LevelKey: "level",
		EncodeCaller: zapcore.ShortCallerEncoder, EncodeLevel: zapcore.LowercaseLevelEncoder,
	})
	return zapr.NewLogger(zap.New(zapcore.NewCore(enc, zapcore.AddSync(w), zapcore.DebugLevel), zap.AddCaller()))
}

// TestSameLines: a lazy logger writes what the logger it wraps writes, with
// the same caller, whatever the order of names and values.
func TestSameLines(t *testing.T) {
	var direct, lazy bytes.Buffer
	for _, l := range []logr.Logger{zapLogger(&direct), New(zapLogger(&lazy))} {
		l = l.WithName("ctrl").WithValues("controller", "bd", "ref", klog.KRef("ns", "x")).WithName("sub")
		one := l.WithValues("reconcileID", "1")
		two := l.WithValues("reconcileID", "2")
		one.Info("one", "k", 1)
		two.Error(errors.New("boom"), "two")
		one.V(1).Info("debug")
		one.V(5).Info("not shown")
		l.Info("plain")
		helper(one)
	}
	if direct.String() != lazy.String() {
		t.Errorf("lazy logger wrote\n%s\nthe logger it wraps\n%s", lazy.String(), direct.String())
	}
	if n := strings.Count(lazy.String(), "\n"); n != 5 {
		t.Errorf("%d lines, want 5:\n%s", n, lazy.String())
	}
	if !strings.Contains(lazy.String(), `"caller":"lazylog/lazylog_test.go:`) {
		t.Errorf("caller not the test:\n%s", lazy.String())
	}
}

func helper(l logr.Logger) {
	l.WithCallDepth(1).Info("from a helper: the caller is its caller")
}

// TestValuesNotEncodedUntilLogged: adding values allocates far less than
// zap's encoding of them.
func TestValuesNotEncodedUntilLogged(t *testing.T) {
	base := zapLogger(io.Discard)
	lazy := New(base)
	ref := klog.KRef("ns", "x")
	direct := testing.AllocsPerRun(100, func() { _ = base.WithValues("BundleDeployment", ref, "name", "x").WithValues("reconcileID", "abc") })
	deferred := testing.AllocsPerRun(100, func() { _ = lazy.WithValues("BundleDeployment", ref, "name", "x").WithValues("reconcileID", "abc") })
	if deferred >= direct {
		t.Errorf("%.0f allocations to add values lazily, %.0f directly", deferred, direct)
	}
	t.Logf("allocations to add a reconcile's values: %.0f directly, %.0f lazily", direct, deferred)
}
