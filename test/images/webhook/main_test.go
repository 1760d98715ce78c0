package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rukpak-dev/rukpak/internal/selfsigned"
)

func post(t *testing.T, h http.Handler, path string, body any, out any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", path, bytes.NewReader(b)))
	if rec.Code != http.StatusOK {
		t.Fatalf("POST %s: %d %s", path, rec.Code, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
		t.Fatal(err)
	}
}

func admission(op admissionv1.Operation, obj string) admissionv1.AdmissionReview {
	ar := admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{UID: types.UID("u1"), Operation: op, Object: runtime.RawExtension{Raw: []byte(obj)}}}
	ar.APIVersion, ar.Kind = "admission.k8s.io/v1", "AdmissionReview"
	return ar
}

func TestMutate(t *testing.T) {
	h := handler()
	for obj, want := range map[string]string{
		`{"metadata":{"name":"a"}}`:                                      `[{"op":"add","path":"/metadata/labels","value":{}},{"op":"add","path":"/metadata/labels/webhook.rukpak.test~1mutated","value":"true"}]`,
		`{"metadata":{"name":"a","labels":{"x":"y"}}}`:                   `[{"op":"add","path":"/metadata/labels/webhook.rukpak.test~1mutated","value":"true"}]`,
		`{"metadata":{"labels":{"webhook.rukpak.test/mutated":"true"}}}`: ``,
	} {
		var out admissionv1.AdmissionReview
		post(t, h, "/mutate", admission(admissionv1.Create, obj), &out)
		if out.Response == nil || !out.Response.Allowed || out.Response.UID != "u1" || out.APIVersion != "admission.k8s.io/v1" {
			t.Fatalf("%s: %+v", obj, out)
		}
		if got := string(out.Response.Patch); got != want {
			t.Errorf("%s: patch %s, want %s", obj, got, want)
		}
	}
}

func TestValidate(t *testing.T) {
	h := handler()
	var out admissionv1.AdmissionReview
	post(t, h, "/validate", admission(admissionv1.Create, `{"metadata":{"labels":{"webhook.rukpak.test/deny":"nope"}}}`), &out)
	if out.Response.Allowed || !strings.Contains(out.Response.Result.Message, "nope") || out.Response.Result.Code != 403 {
		t.Errorf("deny label: %+v", out.Response)
	}
	post(t, h, "/validate", admission(admissionv1.Update, `{"metadata":{"labels":{"a":"b"}}}`), &out)
	if !out.Response.Allowed {
		t.Errorf("no deny label: %+v", out.Response)
	}
}

func TestConvert(t *testing.T) {
	cr := apiextensionsv1.ConversionReview{Request: &apiextensionsv1.ConversionRequest{UID: "c1", DesiredAPIVersion: "test.rukpak.test/v2", Objects: []runtime.RawExtension{
		{Raw: []byte(`{"apiVersion":"test.rukpak.test/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"size":1}}`)},
		{Raw: []byte(`{"apiVersion":"test.rukpak.test/v2","kind":"Widget","metadata":{"name":"b"}}`)},
	}}}
	cr.APIVersion, cr.Kind = "apiextensions.k8s.io/v1", "ConversionReview"
	var out apiextensionsv1.ConversionReview
	post(t, handler(), "/convert", cr, &out)
	if out.Response == nil || out.Response.UID != "c1" || out.Response.Result.Status != "Success" || len(out.Response.ConvertedObjects) != 2 {
		t.Fatalf("%+v", out.Response)
	}
	want := []string{
		`{"apiVersion":"test.rukpak.test/v2","kind":"Widget","metadata":{"annotations":{"webhook.rukpak.test/converted-from":"test.rukpak.test/v1"},"name":"a"},"spec":{"size":1}}`,
		`{"apiVersion":"test.rukpak.test/v2","kind":"Widget","metadata":{"name":"b"}}`,
	}
	for i, o := range out.Response.ConvertedObjects {
		if string(o.Raw) != want[i] {
			t.Errorf("object %d: %s, want %s", i, o.Raw, want[i])
		}
	}
}

func writePair(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	p, err := selfsigned.New([]string{"127.0.0.1", "localhost"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), p.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), p.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CAPEM)
	return pool
}

// TestTLSAndRotation serves over TLS from the cert dir and picks up a
// rotated certificate without a restart.
func TestTLSAndRotation(t *testing.T) {
	dir := t.TempDir()
	l := &certLoader{dir: dir}
	rec := httptest.NewRecorder()
	healthHandler(l).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("readyz without a certificate: %d", rec.Code)
	}
	pool1 := writePair(t, dir)
	// The same server run() starts (httptest's StartTLS would put its own
	// certificate first).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler(), ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: l.GetCertificate}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	defer func() { _ = srv.Close() }()
	url := "https://" + ln.Addr().String()
	call := func(pool *x509.CertPool) error {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}, Timeout: 5 * time.Second}
		defer c.CloseIdleConnections()
		b, _ := json.Marshal(admission(admissionv1.Create, `{"metadata":{}}`))
		resp, err := c.Post(url+"/validate", "application/json", bytes.NewReader(b))
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	if err := call(pool1); err != nil {
		t.Fatalf("first certificate: %v", err)
	}
	// A different size or mtime marks the change; make sure the mtime moves.
	time.Sleep(10 * time.Millisecond)
	pool2 := writePair(t, dir)
	if err := call(pool2); err != nil {
		t.Fatalf("rotated certificate: %v", err)
	}
	if err := call(pool1); err == nil {
		t.Error("the old CA still verifies after rotation")
	}
	rec = httptest.NewRecorder()
	healthHandler(l).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("readyz with a certificate: %d", rec.Code)
	}
}

// TestAggregatedAPI: the discovery the aggregator checks before marking an
// APIService Available, and an empty list of its one resource.
func TestAggregatedAPI(t *testing.T) {
	h := handler()
	get := func(path string) string {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("GET %s: %d %s %s", path, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
		return strings.TrimSpace(rec.Body.String())
	}
	if got, want := get("/apis/apiservice.rukpak.test/v1alpha1"),
		`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"apiservice.rukpak.test/v1alpha1","resources":[{"name":"widgets","singularName":"widget","namespaced":true,"kind":"Widget","verbs":["get","list"]}]}`; got != want {
		t.Errorf("discovery:\n got %s\nwant %s", got, want)
	}
	for _, path := range []string{"/apis/apiservice.rukpak.test/v1beta1/widgets", "/apis/apiservice.rukpak.test/v1beta1/namespaces/ns/widgets"} {
		if got, want := get(path), `{"apiVersion":"apiservice.rukpak.test/v1beta1","items":[],"kind":"WidgetList","metadata":{}}`; got != want {
			t.Errorf("%s:\n got %s\nwant %s", path, got, want)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/apis", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /apis: %d, want 404 (no aggregated discovery: the aggregator falls back to each group version)", rec.Code)
	}
}
