package release

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"runtime"
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// helmRecord is a Secret in Helm's format holding payload as Helm stores it
// (base64 of the gzipped bytes unless plain).
func helmRecord(t *testing.T, payload []byte, plain bool) *corev1.Secret {
	t.Helper()
	if !plain {
		var err error
		if payload, err = gzipBytes(payload); err != nil {
			t.Fatal(err)
		}
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.r.v1"},
		Type:       helmSecretType,
		Data:       map[string][]byte{dataRelease: []byte(base64.StdEncoding.EncodeToString(payload))},
	}
}

func TestDecodeHelmRecord(t *testing.T) {
	d := newChunkedSecrets(nil, nil, 1<<20)
	stub, err := placeholder("sh.helm.release.v1.r.v1", &helmrelease.Release{Name: "r", Version: 1, Info: &helmrelease.Info{Status: helmrelease.StatusDeployed}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	placeholderSecret := helmRecord(t, nil, true)
	placeholderSecret.Data[dataRelease] = []byte(base64.StdEncoding.EncodeToString(stub))

	for _, tc := range []struct {
		name     string
		secret   *corev1.Secret
		manifest string
		err      error
		msg      string
	}{
		{"gzipped, as Helm writes", helmRecord(t, []byte(`{"name":"r","version":1,"manifest":"m"}`), false), "m", nil, ""},
		{"plain JSON, as Helm wrote before compressing", helmRecord(t, []byte(`{"name":"r","version":1,"manifest":"p"}`), true), "p", nil, ""},
		{"not base64", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.r.v1"}, Data: map[string][]byte{dataRelease: []byte("!!")}}, "", ErrCorruptRecord,
			"release record is corrupt: sh.helm.release.v1.r.v1: illegal base64 data at input byte 0"},
		{"truncated gzip", func() *corev1.Secret {
			s := helmRecord(t, []byte(`{"name":"r","version":1,"manifest":"m"}`), false)
			raw, _ := base64.StdEncoding.DecodeString(string(s.Data[dataRelease]))
			s.Data[dataRelease] = []byte(base64.StdEncoding.EncodeToString(raw[:len(raw)-6]))
			return s
		}(), "", ErrCorruptRecord, "release record is corrupt: sh.helm.release.v1.r.v1: unexpected EOF"},
		{"a placeholder without its chunks", placeholderSecret, "", ErrCorruptRecord,
			"release record is corrupt: sh.helm.release.v1.r.v1 holds only the placeholder of a record split across Secrets (another tool rewrote it without its chunk references)"},
		{"inflating past the maximum", helmRecord(t, []byte(`{"name":"r","manifest":"`+strings.Repeat("a", 2<<20)+`"}`), false), "", ErrRecordTooLarge,
			"release record too large: sh.helm.release.v1.r.v1 is more than the maximum of 1048576 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rls, err := d.decode(context.Background(), tc.secret)
			if tc.err == nil {
				if err != nil || rls.Manifest != tc.manifest {
					t.Fatalf("got %v, %v", rls, err)
				}
				return
			}
			if rls != nil || !errors.Is(err, tc.err) || err.Error() != tc.msg {
				t.Errorf("got %v\nwant %s", err, tc.msg)
			}
		})
	}
}

// A record that fits one Secret but inflates to 700 MiB is refused after
// reading the maximum record size, not inflated whole.
func TestDecodeBombIsBounded(t *testing.T) {
	member := func(prefix string) []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write([]byte(prefix))
		_, _ = zw.Write(bytes.Repeat([]byte("a"), 64<<20))
		_ = zw.Close()
		return buf.Bytes()
	}
	// gzip members concatenate: 11 x 64 MiB of one JSON string.
	bomb := member(`{"name":"r","manifest":"`)
	more := member("")
	for range 10 {
		bomb = append(bomb, more...)
	}
	s := helmRecord(t, bomb, true)
	if len(s.Data[dataRelease]) > secretDataLimit {
		t.Fatalf("the bomb does not fit a Secret: %d bytes", len(s.Data[dataRelease]))
	}
	d := newChunkedSecrets(nil, nil, 0)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := d.decode(context.Background(), s)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrRecordTooLarge) {
		t.Errorf("got %v", err)
	}
	// Without the bound, decoding allocates over 1 GiB (the JSON, then the
	// string).
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
		t.Errorf("decoding allocated %d MiB", alloc>>20)
	} else {
		t.Logf("refused a %d-byte record inflating to 704 MiB after allocating %d MiB", len(s.Data[dataRelease]), alloc>>20)
	}
}

func TestEncodeRefusesTooLarge(t *testing.T) {
	d := newChunkedSecrets(nil, nil, 1<<20)
	for _, tc := range []struct {
		name, manifest, want string
	}{
		{"a manifest over the maximum, before it is copied", strings.Repeat("a", 2<<20),
			`release record too large: release "r" revision 2 has a 2097152-byte manifest, more than the maximum of 1048576 bytes`},
		// JSON escapes every quote: 600 KiB of them encode to 1.2 MB.
		{"a record over the maximum once encoded", strings.Repeat(`"`, 600<<10),
			`release record too large: release "r" revision 2 is 1228900 bytes, more than the maximum of 1048576 bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rls := &helmrelease.Release{Name: "r", Version: 2, Manifest: tc.manifest, Info: &helmrelease.Info{}}
			_, err := d.encode(rls)
			if !errors.Is(err, ErrRecordTooLarge) || err.Error() != tc.want {
				t.Errorf("got %v", err)
			}
		})
	}
}
