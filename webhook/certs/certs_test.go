package certs

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
)

func keyPair(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "x"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func TestSecretWriter(t *testing.T) {
	cert, key := keyPair(t)
	otherCert, _ := keyPair(t)
	cases := []struct {
		name      string
		data      map[string][]byte
		wantFiles bool
	}{
		{"empty Secret", nil, false},
		{"mismatched pair", map[string][]byte{CertFile: otherCert, KeyFile: key}, false},
		{"garbage", map[string][]byte{CertFile: []byte("x"), KeyFile: []byte("y")}, false},
		{"valid pair", map[string][]byte{CertFile: cert, KeyFile: key, CAFile: cert}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := &SecretWriter{Dir: t.TempDir()}
			w.write(logr.Discard(), &corev1.Secret{Data: tc.data})
			_, err := os.Stat(filepath.Join(w.Dir, CertFile))
			if got := err == nil; got != tc.wantFiles {
				t.Fatalf("files written = %v, want %v", got, tc.wantFiles)
			}
			select {
			case <-w.Ready():
				if !tc.wantFiles {
					t.Fatal("ready without valid files")
				}
			default:
				if tc.wantFiles {
					t.Fatal("not ready after writing valid files")
				}
			}
			if tc.wantFiles {
				if _, err := DirReady(w.Dir); err != nil {
					t.Fatalf("DirReady after write: %v", err)
				}
				// A second identical write is a no-op and must not panic on
				// the already closed ready channel.
				w.write(logr.Discard(), &corev1.Secret{Data: tc.data})
			}
		})
	}
}

func TestWriteIfChanged(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	for i, tc := range []struct {
		data        string
		wantChanged bool
	}{{"a", true}, {"a", false}, {"b", true}} {
		changed, err := writeIfChanged(p, []byte(tc.data))
		if err != nil || changed != tc.wantChanged {
			t.Fatalf("step %d: changed=%v err=%v, want changed=%v", i, changed, err, tc.wantChanged)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestDirReadyNamesTheProblem(t *testing.T) {
	dir := t.TempDir()
	_, err := DirReady(dir)
	if err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("got %v, want an error naming %s", err, dir)
	}
}

func TestAllReady(t *testing.T) {
	for _, waitInjected := range []bool{true, false} {
		files, injected := make(chan struct{}), make(chan struct{})
		ready := allReady(context.Background(), files, injected, waitInjected)
		close(files)
		select {
		case <-ready:
			if waitInjected {
				t.Fatal("ready before CA injection")
			}
		case <-time.After(100 * time.Millisecond):
			if !waitInjected {
				t.Fatal("not ready once files are written")
			}
			close(injected)
			<-ready
		}
	}
}

func TestAfterReadyAndReadyChecker(t *testing.T) {
	ready := make(chan struct{})
	if err := ReadyChecker(ready)(nil); err == nil {
		t.Fatal("ready checker passed before ready")
	}
	started := make(chan struct{})
	r := AfterReady(ready, runnableFunc(func(context.Context) error { close(started); return nil }))
	done := make(chan error)
	go func() { done <- r.Start(context.Background()) }()
	select {
	case <-started:
		t.Fatal("runnable started before ready")
	case <-time.After(50 * time.Millisecond):
	}
	close(ready)
	<-started
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := ReadyChecker(ready)(nil); err != nil {
		t.Fatalf("ready checker after ready: %v", err)
	}
}

type runnableFunc func(context.Context) error

func (f runnableFunc) Start(ctx context.Context) error { return f(ctx) }
