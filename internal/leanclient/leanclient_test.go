package leanclient

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// serve answers with the handler's answers and counts the requests.
func serve(t *testing.T, h func(n int64, w http.ResponseWriter, r *http.Request)) (*Client, *atomic.Int64, *atomic.Int64) {
	t.Helper()
	var requests, delegated atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(requests.Add(1), w, r)
	}))
	t.Cleanup(srv.Close)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Namespace"), meta.RESTScopeRoot)
	inner := interceptor.NewClient(fake.NewClientBuilder().WithRESTMapper(mapper).Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			delegated.Add(1)
			return c.Get(ctx, key, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			delegated.Add(1)
			return nil
		},
	})
	cfg := &rest.Config{Host: srv.URL}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(inner, cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	return c, &requests, &delegated
}

func configMap(namespace, name string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	m.Namespace, m.Name = namespace, name
	return m
}

const answerJSON = `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"x","namespace":"ns","uid":"u1","resourceVersion":"7","generation":2,"labels":{"a":"b"}}}`

func TestGetAndApply(t *testing.T) {
	var seen []string
	c, requests, delegated := serve(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Content-Type"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(answerJSON))
	})
	ctx := context.Background()
	m := configMap("", "")
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "x"}, m); err != nil {
		t.Fatal(err)
	}
	if m.Name != "x" || m.UID != "u1" || m.ResourceVersion != "7" || m.Generation != 2 || m.Labels["a"] != "b" || m.GroupVersionKind() != corev1.SchemeGroupVersion.WithKind("ConfigMap") {
		t.Errorf("read %+v", m)
	}
	a := configMap("ns", "x")
	if err := c.Patch(ctx, a, client.RawPatch(types.ApplyPatchType, []byte(`{"apiVersion":"v1","kind":"ConfigMap"}`)),
		client.FieldOwner("me"), client.ForceOwnership, client.FieldValidation(metav1.FieldValidationIgnore)); err != nil {
		t.Fatal(err)
	}
	if a.ResourceVersion != "7" || a.GroupVersionKind().Kind != "ConfigMap" {
		t.Errorf("applied %+v", a)
	}
	want := []string{
		"GET /api/v1/namespaces/ns/configmaps/x ",
		"PATCH /api/v1/namespaces/ns/configmaps/x?fieldManager=me&fieldValidation=Ignore&force=true application/apply-patch+yaml",
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
	// A cluster-scoped kind has no namespace in its path.
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := c.Get(ctx, client.ObjectKey{Name: "x"}, ns); err != nil || seen[len(seen)-1] != "GET /api/v1/namespaces/x " {
		t.Errorf("namespace read: %v, %s", err, seen[len(seen)-1])
	}
	// What it does not handle is the wrapped client's.
	before := requests.Load()
	if err := c.Patch(ctx, configMap("ns", "x"), client.RawPatch(types.ApplyPatchType, []byte(`{}`)), client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	_ = c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "x"}, &corev1.ConfigMap{})
	if requests.Load() != before || delegated.Load() != 2 {
		t.Errorf("a dry run and a typed read: %d requests sent, %d delegated; want 0 and 2", requests.Load()-before, delegated.Load())
	}
}

func TestHostileNamesAreNeverSent(t *testing.T) {
	c, requests, _ := serve(t, func(_ int64, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	ctx := context.Background()
	for _, key := range []client.ObjectKey{
		{Namespace: "ns", Name: ".."},
		{Namespace: "ns", Name: "a/b"},
		{Namespace: "ns", Name: "a%2fb"},
		{Namespace: "..", Name: "x"},
		{Namespace: "", Name: "x"}, // a namespaced kind
		{Namespace: "ns", Name: ""},
	} {
		if err := c.Get(ctx, key, configMap("", "")); err == nil {
			t.Errorf("read of %v: no error", key)
		}
		if err := c.Patch(ctx, configMap(key.Namespace, key.Name), client.RawPatch(types.ApplyPatchType, []byte(`{}`))); err == nil {
			t.Errorf("apply of %v: no error", key)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests sent", n)
	}
	unknown := &metav1.PartialObjectMetadata{}
	unknown.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Gizmo"))
	if err := c.Get(ctx, client.ObjectKey{Name: "x"}, unknown); !meta.IsNoMatchError(err) {
		t.Errorf("unknown kind: %v, want a no-match error", err)
	}
}

func TestErrorsAreStatusErrors(t *testing.T) {
	c, _, _ := serve(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
		switch n {
		case 1:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"configmaps \"x\" not found"}`))
		case 2:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict","code":409,"message":"Apply failed with 1 conflict"}`))
		default:
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte("not json"))
		}
	})
	ctx := context.Background()
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "x"}, configMap("", "")); !apierrors.IsNotFound(err) {
		t.Errorf("404: %v", err)
	}
	if err := c.Patch(ctx, configMap("ns", "x"), client.RawPatch(types.ApplyPatchType, []byte(`{}`))); !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "1 conflict") {
		t.Errorf("409: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "x"}, configMap("", "")); !apierrors.IsForbidden(err) {
		t.Errorf("403 without a status: %v", err)
	}
}

func TestRetriesWhatTheServerAsks(t *testing.T) {
	throttled := int64(3)
	c, requests, _ := serve(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
		if n <= throttled {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(answerJSON))
	})
	ctx := context.Background()
	a := configMap("ns", "x")
	if err := c.Patch(ctx, a, client.RawPatch(types.ApplyPatchType, []byte(`{"apiVersion":"v1","kind":"ConfigMap"}`))); err != nil || a.ResourceVersion != "7" {
		t.Fatalf("after 3 throttled answers: %v (%+v)", err, a)
	}
	if n := requests.Load(); n != 4 {
		t.Errorf("%d requests, want 4", n)
	}
	// Ten retries at most, then the throttling is the error.
	throttled = 1 << 30
	requests.Store(0)
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "x"}, configMap("", "")); !apierrors.IsTooManyRequests(err) {
		t.Errorf("always throttled: %v", err)
	}
	if n := requests.Load(); n != 1+maxRetries {
		t.Errorf("%d requests, want %d", n, 1+maxRetries)
	}
}

func TestAnswersAreBounded(t *testing.T) {
	c, _, _ := serve(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"` + strings.Repeat("x", maxAnswer) + `"}}`))
	})
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "x"}, configMap("", "")); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("an answer past the bound: %v", err)
	}
}

func TestOpen(t *testing.T) {
	c, requests, _ := serve(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if n == 1 {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
			return
		}
		_, _ = w.Write([]byte(`{"path":"` + r.URL.Path + `","accept":"` + r.Header.Get("Accept") + `"}`))
	})
	ctx := context.Background()
	gr := schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}
	if _, err := c.Open(ctx, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/a.b", gr, "a.b"); !apierrors.IsNotFound(err) {
		t.Errorf("absent: %v", err)
	}
	rc, err := c.Open(ctx, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/a.b", gr, "a.b")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close() //nolint:errcheck // a test's read
	body, _ := io.ReadAll(rc)
	if string(body) != `{"path":"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/a.b","accept":"application/json"}` {
		t.Errorf("read %s", body)
	}
	for _, name := range []string{"..", "a/b", "", "a%2f"} {
		if CheckName(name) == nil {
			t.Errorf("CheckName(%q): no error", name)
		}
	}
	if requests.Load() != 2 {
		t.Errorf("%d requests", requests.Load())
	}
}

func TestDecodeProtobuf(t *testing.T) {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	if err := metav1.AddMetaToScheme(s); err != nil {
		t.Fatal(err)
	}
	enc := protobuf.NewSerializer(s, s)
	in := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns", UID: "u", ResourceVersion: "9", Labels: map[string]string{"a": "b"}}}
	in.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata"))
	var buf bytes.Buffer
	if err := enc.Encode(in, &buf); err != nil {
		t.Fatal(err)
	}
	var out metav1.PartialObjectMetadata
	if err := decode(buf.Bytes(), "PartialObjectMetadata", &out); err != nil || out.Name != "x" || out.UID != "u" || out.ResourceVersion != "9" || out.Labels["a"] != "b" {
		t.Errorf("decoded %+v, %v", out, err)
	}
	if err := decode(buf.Bytes(), "Status", &metav1.Status{}); err == nil {
		t.Error("a PartialObjectMetadata decoded as a Status")
	}
	for n := 5; n < buf.Len(); n += 7 {
		var m metav1.PartialObjectMetadata
		_ = decode(buf.Bytes()[:n], "PartialObjectMetadata", &m) // never panics
	}
}

func TestProtobufIsWhatTheAPIServerReads(t *testing.T) {
	in := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", Labels: map[string]string{"owner": "helm"}},
		Type: "helm.sh/release.v1", Data: map[string][]byte{"release": bytes.Repeat([]byte("x"), 300)}}
	b, err := Protobuf(in, "v1", "Secret")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != cap(b) {
		t.Errorf("%d bytes in a buffer of %d", len(b), cap(b))
	}
	out, gvk, err := protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme).Decode(b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := out.(*corev1.Secret)
	if !ok || gvk.Kind != "Secret" || s.Name != "r" || s.Labels["owner"] != "helm" || string(s.Data["release"]) != string(in.Data["release"]) || s.Type != in.Type {
		t.Errorf("decoded %v %+v", gvk, out)
	}
}
