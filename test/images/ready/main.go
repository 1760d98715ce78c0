// Command ready is the test operator image of a Deployment that becomes
// Ready: an HTTP server on $PORT (default 8080) whose /readyz answers 200
// once $READY_AFTER (a Go duration, default 0) has passed since it started,
// and 503 before, or after a POST /unready (a POST /ready undoes it);
// /healthz always answers 200; / answers with the pod's hostname and
// $MESSAGE. It stops gracefully on SIGTERM. Built by internal/nodeimages.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

// server holds the readiness state.
type server struct {
	readyAt time.Time
	unready atomic.Bool
	now     func() time.Time
	message string
}

func (s *server) ready() bool {
	return !s.unready.Load() && !s.now().Before(s.readyAt)
}

func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("POST /unready", func(w http.ResponseWriter, _ *http.Request) {
		s.unready.Store(true)
		_, _ = fmt.Fprintln(w, "unready")
	})
	mux.HandleFunc("POST /ready", func(w http.ResponseWriter, _ *http.Request) {
		s.unready.Store(false)
		_, _ = fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		host, _ := os.Hostname()
		_, _ = fmt.Fprintf(w, "%s %s\n", host, s.message)
	})
	return mux
}

func main() {
	if err := run(); err != nil {
		log.Fatalf("ready: %v", err)
	}
}

func run() error {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	var after time.Duration
	if v := os.Getenv("READY_AFTER"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("READY_AFTER: %w", err)
		}
		after = d
	}
	s := &server{readyAt: time.Now().Add(after), now: time.Now, message: os.Getenv("MESSAGE")}
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return err
	}
	log.Printf("ready: listening on %s, ready after %v", ln.Addr(), after)
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Print("ready: signalled, shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
