package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func status(t *testing.T, h http.Handler, method, path string) int {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader("")))
	return rec.Code
}

func TestReadiness(t *testing.T) {
	now := time.Unix(1000, 0)
	s := &server{readyAt: now.Add(time.Second), now: func() time.Time { return now }}
	h := s.handler()
	if c := status(t, h, "GET", "/healthz"); c != 200 {
		t.Errorf("healthz %d", c)
	}
	if c := status(t, h, "GET", "/readyz"); c != 503 {
		t.Errorf("readyz before READY_AFTER: %d, want 503", c)
	}
	now = now.Add(time.Second)
	if c := status(t, h, "GET", "/readyz"); c != 200 {
		t.Errorf("readyz after READY_AFTER: %d, want 200", c)
	}
	if c := status(t, h, "POST", "/unready"); c != 200 {
		t.Errorf("unready %d", c)
	}
	if c := status(t, h, "GET", "/readyz"); c != 503 {
		t.Errorf("readyz after /unready: %d, want 503", c)
	}
	if c := status(t, h, "GET", "/healthz"); c != 200 {
		t.Errorf("healthz after /unready: %d", c)
	}
	status(t, h, "POST", "/ready")
	if c := status(t, h, "GET", "/readyz"); c != 200 {
		t.Errorf("readyz after /ready: %d, want 200", c)
	}
	if c := status(t, h, "GET", "/"); c != 200 {
		t.Errorf("/ %d", c)
	}
	if c := status(t, h, "GET", "/nothing"); c != 404 {
		t.Errorf("/nothing %d", c)
	}
}
