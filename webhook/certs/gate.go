package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// AfterReady starts r only once ready is closed. The webhook server reads
// its certificate when it starts, so it must not start before the files are
// there.
func AfterReady(ready <-chan struct{}, r manager.Runnable) manager.Runnable {
	return gated{ready: ready, next: r}
}

type gated struct {
	ready <-chan struct{}
	next  manager.Runnable
}

func (g gated) Start(ctx context.Context) error {
	select {
	case <-g.ready:
		return g.next.Start(ctx)
	case <-ctx.Done():
		return nil
	}
}

// NeedLeaderElection is false: every replica serves.
func (g gated) NeedLeaderElection() bool { return false }

// ReadyChecker reports ready once ready is closed.
func ReadyChecker(ready <-chan struct{}) healthz.Checker {
	return func(*http.Request) error {
		select {
		case <-ready:
			return nil
		default:
			return errors.New("webhook certificates are not in place yet")
		}
	}
}

// DirReady returns a closed channel when dir holds a valid tls.crt/tls.key
// pair (certificates provided by cert-manager or an admin), else an error
// naming the problem.
func DirReady(dir string) (<-chan struct{}, error) {
	cert, key := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
	if _, err := tls.LoadX509KeyPair(cert, key); err != nil {
		return nil, fmt.Errorf("loading serving certificate from %s: %w", dir, err)
	}
	ch := make(chan struct{})
	close(ch)
	return ch, nil
}
