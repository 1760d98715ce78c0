package webhook_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/rukpak-dev/rukpak/webhook"
)

// testBadRequests posts malformed and unexpected requests straight to the
// server: each gets an error AdmissionReview, and the server keeps serving.
func testBadRequests(t *testing.T, wio envtest.WebhookInstallOptions) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(wio.LocalServingCAData)
	base := "https://" + net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))
	httpc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}

	review := func(kind string, op admissionv1.Operation, object string) string {
		return `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1",` +
			`"kind":{"group":"` + groupOf(kind) + `","version":"v1` + versionSuffix(kind) + `","kind":"` + kind + `"},` +
			`"resource":{"group":"","version":"v1","resource":"x"},"operation":"` + string(op) + `",` +
			`"object":` + object + `,"oldObject":` + object + `}}`
	}
	cases := []struct {
		name        string
		path        string
		contentType string
		body        []byte
		wantCode    int32
		wantMsg     string
		wantAllowed bool
	}{
		{"empty body", webhook.BundlePath, "application/json", nil, http.StatusBadRequest, "request body is empty", false},
		{"malformed JSON", webhook.BundlePath, "application/json", []byte(`{"apiVersion":`), http.StatusBadRequest, "", false},
		{"not an AdmissionReview", webhook.BundlePath, "application/json", []byte(`{"apiVersion":"v1","kind":"ConfigMap"}`), http.StatusBadRequest, "", false},
		{"wrong content type", webhook.BundlePath, "text/plain", []byte(review("Bundle", admissionv1.Create, `{}`)), http.StatusBadRequest, "expected application/json", false},
		{"oversized body", webhook.BundlePath, "application/json", bytes.Repeat([]byte("a"), 8<<20), http.StatusRequestEntityTooLarge, "request entity is too large", false},
		{"unknown kind", webhook.BundlePath, "application/json", []byte(review("ConfigMap", admissionv1.Create, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`)), http.StatusBadRequest, `this webhook admits core.rukpak.io/v1alpha1, Kind=Bundle`, false},
		{"Bundle kind on the BundleDeployment path", webhook.BundleDeploymentPath, "application/json", []byte(review("Bundle", admissionv1.Create, `{"apiVersion":"core.rukpak.io/v1alpha1","kind":"Bundle","metadata":{"name":"x"}}`)), http.StatusBadRequest, "Kind=BundleDeployment", false},
		{"object of the wrong type", webhook.BundlePath, "application/json", []byte(review("Bundle", admissionv1.Update, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`)), http.StatusBadRequest, "", false},
		{"object not JSON", webhook.BundlePath, "application/json", []byte(review("Bundle", admissionv1.Create, `"zzz"`)), http.StatusBadRequest, "", false},
		{"unknown operation", webhook.BundlePath, "application/json", []byte(review("Bundle", "EXPLODE", `{"apiVersion":"core.rukpak.io/v1alpha1","kind":"Bundle","metadata":{"name":"x"}}`)), http.StatusBadRequest, "unknown operation", false},
		{"valid request still served", webhook.BundlePath, "application/json", []byte(review("Bundle", admissionv1.Update, `{"apiVersion":"core.rukpak.io/v1alpha1","kind":"Bundle","metadata":{"name":"x"},"spec":{"provisionerClassName":"p","source":{"type":"image","image":{"ref":"r"}}}}`)), http.StatusOK, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := httpc.Post(base+tc.path, tc.contentType, bytes.NewReader(tc.body))
			if err != nil {
				t.Fatalf("POST: %v", err)
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("reading response: %v", err)
			}
			var ar admissionv1.AdmissionReview
			if err := json.Unmarshal(raw, &ar); err != nil || ar.Response == nil {
				t.Fatalf("response is not an AdmissionReview (%v): %s", err, raw)
			}
			r := ar.Response
			if r.Allowed != tc.wantAllowed {
				t.Fatalf("allowed = %v, want %v: %s", r.Allowed, tc.wantAllowed, raw)
			}
			if tc.wantAllowed {
				return
			}
			if r.Result == nil || r.Result.Code != tc.wantCode || !strings.Contains(r.Result.Message, tc.wantMsg) {
				t.Fatalf("result = %s, want code %d and message containing %q", raw, tc.wantCode, tc.wantMsg)
			}
		})
	}

	t.Run("TLS below 1.2 refused", func(t *testing.T) {
		conn, err := tls.Dial("tcp", strings.TrimPrefix(base, "https://"), &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11}) //nolint:gosec // the point of the test
		if err == nil {
			conn.Close()
			t.Fatal("TLS 1.1 handshake succeeded")
		}
	})
	t.Run("HTTP/2 off by default", func(t *testing.T) {
		conn, err := tls.Dial("tcp", strings.TrimPrefix(base, "https://"), &tls.Config{RootCAs: pool, NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		defer conn.Close()
		if p := conn.ConnectionState().NegotiatedProtocol; p == "h2" {
			t.Fatalf("negotiated %q", p)
		}
	})
}

func groupOf(kind string) string {
	if kind == "Bundle" || kind == "BundleDeployment" {
		return "core.rukpak.io"
	}
	return ""
}

func versionSuffix(kind string) string {
	if groupOf(kind) != "" {
		return "alpha1"
	}
	return ""
}
