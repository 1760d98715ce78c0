// Command webhook is the test operator image that serves admission and
// conversion webhooks over TLS behind a Service, like an operator built
// with controller-runtime: it listens on $PORT (default 9443) with the
// certificate in $CERT_DIR (default /tmp/k8s-webhook-server/serving-certs)
// as tls.crt and tls.key, re-read whenever either file changes (so a
// rotated certificate is picked up without a restart). Plain-HTTP /healthz
// and /readyz answer on $HEALTH_PORT (default 8081); /readyz is 200 once a
// certificate has loaded.
//
//   - POST /mutate (AdmissionReview v1): adds the label
//     webhook.rukpak.test/mutated=true to the object.
//   - POST /validate (AdmissionReview v1): denies an object carrying the
//     label webhook.rukpak.test/deny, with its value as the message.
//   - POST /convert (ConversionReview v1): sets each object's apiVersion to
//     the desired one and records the old one in the annotation
//     webhook.rukpak.test/converted-from.
//   - GET /apis/{group}/{version}: an aggregated API server's discovery,
//     one namespaced resource "widgets" (kind Widget), for the APIServices
//     of a CSV's owned apiservicedefinitions; GET .../widgets (all
//     namespaces or .../namespaces/{ns}/widgets) lists none.
//
// Built by internal/nodeimages.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

const (
	// DefaultCertDir is controller-runtime's default serving-cert directory.
	DefaultCertDir = "/tmp/k8s-webhook-server/serving-certs"
	// MutatedLabel is set by /mutate.
	MutatedLabel = "webhook.rukpak.test/mutated"
	// DenyLabel makes /validate deny the object.
	DenyLabel = "webhook.rukpak.test/deny"
	// ConvertedFromAnnotation records the apiVersion /convert converted from.
	ConvertedFromAnnotation = "webhook.rukpak.test/converted-from"
)

// certLoader serves the certificate in dir, reloading it when a file changes.
type certLoader struct {
	dir string

	mu      sync.Mutex
	stamp   string
	current *tls.Certificate
}

func (l *certLoader) get() (*tls.Certificate, error) {
	crt, key := filepath.Join(l.dir, "tls.crt"), filepath.Join(l.dir, "tls.key")
	var stamp strings.Builder
	for _, p := range []string{crt, key} {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&stamp, "%d/%d;", fi.ModTime().UnixNano(), fi.Size())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.current != nil && stamp.String() == l.stamp {
		return l.current, nil
	}
	c, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		if l.current != nil {
			// Mid-rotation (one file written, not the other): keep serving the old pair.
			return l.current, nil
		}
		return nil, err
	}
	if l.current != nil {
		log.Printf("webhook: reloaded the certificate from %s", l.dir)
	}
	l.current, l.stamp = &c, stamp.String()
	return l.current, nil
}

func (l *certLoader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return l.get()
}

// review decodes an AdmissionReview, lets decide fill the response and
// writes the review back.
func review(w http.ResponseWriter, r *http.Request, decide func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) {
	var ar admissionv1.AdmissionReview
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20)).Decode(&ar); err != nil || ar.Request == nil {
		http.Error(w, fmt.Sprintf("want an admission.k8s.io/v1 AdmissionReview: %v", err), http.StatusBadRequest)
		return
	}
	resp := decide(ar.Request)
	resp.UID = ar.Request.UID
	out := admissionv1.AdmissionReview{TypeMeta: ar.TypeMeta, Response: resp}
	if out.APIVersion == "" {
		out.APIVersion, out.Kind = "admission.k8s.io/v1", "AdmissionReview"
	}
	writeJSON(w, out)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		log.Printf("webhook: writing the response: %v", err)
	}
}

// objectMeta reads the metadata of a raw object.
func objectMeta(raw []byte) (metav1.ObjectMeta, error) {
	var o struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	err := json.Unmarshal(raw, &o)
	return o.Metadata, err
}

func mutate(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	meta, err := objectMeta(req.Object.Raw)
	if err != nil {
		return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: err.Error(), Code: http.StatusBadRequest}}
	}
	if meta.Labels[MutatedLabel] == "true" {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	var patch []map[string]any
	if meta.Labels == nil {
		patch = append(patch, map[string]any{"op": "add", "path": "/metadata/labels", "value": map[string]string{}})
	}
	patch = append(patch, map[string]any{"op": "add", "path": "/metadata/labels/" + strings.ReplaceAll(MutatedLabel, "/", "~1"), "value": "true"})
	b, err := json.Marshal(patch)
	if err != nil {
		return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: err.Error(), Code: http.StatusInternalServerError}}
	}
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: b, PatchType: &pt}
}

func validate(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	raw := req.Object.Raw
	if req.Operation == admissionv1.Delete {
		raw = req.OldObject.Raw
	}
	meta, err := objectMeta(raw)
	if err != nil {
		return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: err.Error(), Code: http.StatusBadRequest}}
	}
	if msg, deny := meta.Labels[DenyLabel]; deny {
		return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: "denied by the test webhook: " + msg, Reason: metav1.StatusReasonForbidden, Code: http.StatusForbidden}}
	}
	return &admissionv1.AdmissionResponse{Allowed: true}
}

func convert(w http.ResponseWriter, r *http.Request) {
	var cr apiextensionsv1.ConversionReview
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 32<<20)).Decode(&cr); err != nil || cr.Request == nil {
		http.Error(w, fmt.Sprintf("want an apiextensions.k8s.io/v1 ConversionReview: %v", err), http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: cr.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, o := range cr.Request.Objects {
		var obj map[string]any
		if err := json.Unmarshal(o.Raw, &obj); err != nil {
			resp.ConvertedObjects = nil
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
			break
		}
		from, _ := obj["apiVersion"].(string)
		if from != cr.Request.DesiredAPIVersion {
			md, _ := obj["metadata"].(map[string]any)
			if md == nil {
				md = map[string]any{}
				obj["metadata"] = md
			}
			ann, _ := md["annotations"].(map[string]any)
			if ann == nil {
				ann = map[string]any{}
				md["annotations"] = ann
			}
			ann[ConvertedFromAnnotation] = from
			obj["apiVersion"] = cr.Request.DesiredAPIVersion
		}
		b, err := json.Marshal(obj)
		if err != nil {
			resp.ConvertedObjects = nil
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
			break
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: bytes.TrimSpace(b)})
	}
	out := apiextensionsv1.ConversionReview{TypeMeta: cr.TypeMeta, Response: resp}
	if out.APIVersion == "" {
		out.APIVersion, out.Kind = "apiextensions.k8s.io/v1", "ConversionReview"
	}
	writeJSON(w, out)
}

// discovery answers an aggregated API server's discovery of any group and
// version: the aggregator calls it to mark the APIService Available.
func discovery(w http.ResponseWriter, r *http.Request) {
	gv := r.PathValue("group") + "/" + r.PathValue("version")
	writeJSON(w, metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{APIVersion: "v1", Kind: "APIResourceList"},
		GroupVersion: gv,
		APIResources: []metav1.APIResource{{Name: "widgets", SingularName: "widget", Namespaced: true, Kind: "Widget", Verbs: metav1.Verbs{"get", "list"}}},
	})
}

// widgets lists no Widgets.
func widgets(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]any{
		"apiVersion": r.PathValue("group") + "/" + r.PathValue("version"), "kind": "WidgetList",
		"metadata": map[string]any{}, "items": []any{},
	})
}

// handler is the TLS mux.
func handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /mutate", func(w http.ResponseWriter, r *http.Request) { review(w, r, mutate) })
	mux.HandleFunc("POST /validate", func(w http.ResponseWriter, r *http.Request) { review(w, r, validate) })
	mux.HandleFunc("POST /convert", convert)
	mux.HandleFunc("GET /apis/{group}/{version}", discovery)
	mux.HandleFunc("GET /apis/{group}/{version}/widgets", widgets)
	mux.HandleFunc("GET /apis/{group}/{version}/namespaces/{namespace}/widgets", widgets)
	return mux
}

// healthHandler is the plain-HTTP probe mux.
func healthHandler(l *certLoader) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if _, err := l.get(); err != nil {
			http.Error(w, "no certificate: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintln(w, "ready")
	})
	return mux
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func main() {
	if err := run(); err != nil {
		log.Fatalf("webhook: %v", err)
	}
}

func run() error {
	l := &certLoader{dir: env("CERT_DIR", DefaultCertDir)}
	ln, err := net.Listen("tcp", ":"+env("PORT", "9443"))
	if err != nil {
		return err
	}
	hln, err := net.Listen("tcp", ":"+env("HEALTH_PORT", "8081"))
	if err != nil {
		return err
	}
	log.Printf("webhook: serving TLS on %s with the certificate in %s, probes on %s", ln.Addr(), l.dir, hln.Addr())
	srv := &http.Server{Handler: handler(), ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: l.GetCertificate}}
	hsrv := &http.Server{Handler: healthHandler(l), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errc := make(chan error, 2)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	go func() { errc <- hsrv.Serve(hln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Print("webhook: signalled, shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = errors.Join(srv.Shutdown(sctx), hsrv.Shutdown(sctx))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
