package image

import (
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/selfsigned"
)

func TestTransportsAreSharedPerTLSSetting(t *testing.T) {
	var ts transports
	get := func(src rukpakv1alpha1.ImageSource) any {
		t.Helper()
		tr, err := ts.get(&src)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	ca := caPEM(t)
	plain := get(rukpakv1alpha1.ImageSource{Ref: "a"})
	if get(rukpakv1alpha1.ImageSource{Ref: "b"}) != plain {
		t.Error("two sources without TLS settings got different transports")
	}
	withCA := get(rukpakv1alpha1.ImageSource{Ref: "a", CertificateData: ca})
	if withCA == plain || get(rukpakv1alpha1.ImageSource{Ref: "c", CertificateData: ca}) != withCA {
		t.Error("transports are not shared by exactly the sources with the same CA")
	}
	if get(rukpakv1alpha1.ImageSource{Ref: "a", InsecureSkipTLSVerify: true}) == plain {
		t.Error("insecureSkipTLSVerify shares a verifying transport")
	}
	if _, err := ts.get(&rukpakv1alpha1.ImageSource{Ref: "bad", CertificateData: "not PEM"}); err == nil {
		t.Error("certificateData without a certificate was accepted")
	}
	for i := range 2 * maxTransports {
		get(rukpakv1alpha1.ImageSource{Ref: "x", CertificateData: fmt.Sprintf("%s\n# %d\n", ca, i)})
	}
	if len(ts.m) > maxTransports {
		t.Errorf("%d transports kept, want at most %d", len(ts.m), maxTransports)
	}
}

func caPEM(t *testing.T) string {
	t.Helper()
	p, err := selfsigned.New([]string{"registry.test"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return string(p.CAPEM)
}

// Pulls from one registry at once keep their connections for the next
// ones: over HTTP/1.1 each request in flight holds one, and with the
// default two idle per host the others were closed, their successors
// paying a TLS handshake again.
func TestTransportKeepsConcurrentConnections(t *testing.T) {
	const n = 16
	var (
		arrived   atomic.Int64
		release   = make(chan struct{})
		opened    atomic.Int64
		releaseMu sync.Mutex
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// Every request of a round waits until all n are in flight, so
		// each holds a connection of its own.
		releaseMu.Lock()
		ch := release
		if arrived.Add(1)%n == 0 {
			close(release)
			release = make(chan struct{})
		}
		releaseMu.Unlock()
		<-ch
		_, _ = io.WriteString(w, "blob")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	var ts transports
	rt, err := ts.get(&rukpakv1alpha1.ImageSource{Ref: "x", CertificateData: string(ca)})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: rt}
	round := func() {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				resp, err := client.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			})
		}
		wg.Wait()
	}
	round()
	first := opened.Load()
	if first != n {
		t.Fatalf("%d requests in flight at once opened %d connections", n, first)
	}
	round()
	// A connection not yet back in the pool as the next round starts may
	// be dialled anew; closing all but two opened n-2 again.
	if again := opened.Load() - first; again > n/4 {
		t.Errorf("a second round of %d requests opened %d connections more: the first round's were not kept", n, again)
	}
}
