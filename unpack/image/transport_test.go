package image

import (
	"fmt"
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
