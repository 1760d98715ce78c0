// Package testnet holds network peers for tests that the real test servers
// (internal/testregistry, internal/testgit) cannot play.
package testnet

import (
	"net"
	"sync"
	"testing"
)

// Blackhole accepts TCP connections on loopback and never reads or answers,
// like a hung server or a firewall that swallows packets after the
// handshake. It returns host:port; the listener and every connection close
// when the test ends.
func Blackhole(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

// FreeAddr is a loopback host:port that no one listens on at the time of
// asking, for a server the test starts itself (another process may take
// the port before it does).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
