package leanclient

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A name or namespace with '?' or '#' is a valid path segment
// (IsPathSegmentName allows both; RBAC names are validated only as path
// segments, so ClusterRole "a#b" and "a?b" are valid objects): escaped as
// client-go does (%3F, %23), never a query or fragment that sends the
// request to another object.
func TestQueryAndFragmentStayInThePathSegment(t *testing.T) {
	type seen struct{ path, query string }
	var got []seen
	c, _, _ := serve(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		got = append(got, seen{r.URL.Path, r.URL.RawQuery})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(answerJSON))
	})
	ctx := context.Background()
	for _, tc := range []struct {
		namespace, name string
	}{
		{"ns", "victim?dryRun=All"},
		{"ns", "victim#x"},
		{"ns#x", "victim"},
	} {
		got = nil
		_ = c.Get(ctx, client.ObjectKey{Namespace: tc.namespace, Name: tc.name}, configMap("", ""))
		_ = c.Patch(ctx, configMap(tc.namespace, tc.name), client.RawPatch(types.ApplyPatchType, []byte(`{}`)),
			client.FieldOwner("me"), client.ForceOwnership)
		wantPath := "/api/v1/namespaces/" + tc.namespace + "/configmaps/" + tc.name
		want := []seen{{wantPath, ""}, {wantPath, "fieldManager=me&force=true"}}
		if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("%s/%s: the server saw %+v, want %+v", tc.namespace, tc.name, got, want)
		}
	}
}

// An API server (or a proxy in between) that does not convert the answer
// to PartialObjectMetadata answers a write with the whole object, in
// protobuf since the Accept header prefers it: the write happened, and its
// metadata is read all the same.
func TestWriteAnsweredWithTheWholeObjectInProtobuf(t *testing.T) {
	c, _, _ := serve(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "u1", ResourceVersion: "7"}}
		s.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		var buf bytes.Buffer
		if err := protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme).Encode(s, &buf); err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", ContentTypeProtobuf)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(buf.Bytes())
	})
	body, err := Protobuf(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"}}, "v1", "Secret")
	if err != nil {
		t.Fatal(err)
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err = c.Write(context.Background(), http.MethodPost, "/api/v1/namespaces/ns/secrets", ContentTypeProtobuf, body, m,
		corev1.SchemeGroupVersion.WithResource("secrets").GroupResource(), "r")
	if err != nil || m.UID != "u1" || m.ResourceVersion != "7" {
		t.Errorf("a created Secret answered whole: %v (%+v)", err, m.ObjectMeta)
	}
}

// Requests sent with Transport.RoundTrip keep client-go's
// wrappers: credentials, impersonation, user agent.
func TestImpersonationKept(t *testing.T) {
	var hdr http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr = r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(answerJSON))
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, BearerToken: "tok", Impersonate: rest.ImpersonationConfig{UserName: "system:serviceaccount:ns:sa"}}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	c, err := New(fake.NewClientBuilder().WithRESTMapper(mapper).Build(), cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range []func() error{
		func() error {
			return c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "x"}, configMap("", ""))
		},
		func() error {
			return c.Patch(context.Background(), configMap("ns", "x"), client.RawPatch(types.ApplyPatchType, []byte(`{}`)), client.FieldOwner("m"))
		},
		func() error {
			rc, err := c.Open(context.Background(), "/api/v1/namespaces/ns/configmaps/x", schema.GroupResource{}, "x")
			if err == nil {
				_ = rc.Close()
			}
			return err
		},
	} {
		hdr = nil
		if err := call(); err != nil {
			t.Fatal(err)
		}
		if hdr.Get("Impersonate-User") != "system:serviceaccount:ns:sa" || hdr.Get("Authorization") != "Bearer tok" {
			t.Errorf("headers %v", hdr)
		}
	}
}

// As client-go's metadata client, the Accept header ends with a plain
// application/json: a server that cannot convert to PartialObjectMetadata
// (an aggregated API server not built on k8s.io/apiserver, or an old one)
// answers with the whole object, whose metadata is read, not 406.
func TestServerWithoutConversion(t *testing.T) {
	c, _, _ := serve(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
			if strings.TrimSpace(part) == "application/json" {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x","namespace":"ns","uid":"u1","resourceVersion":"7"},"data":{"k":"v"}}`))
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotAcceptable)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotAcceptable","code":406,"message":"only the following media types are accepted: application/json"}`))
	})
	m := configMap("", "")
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "x"}, m); err != nil || m.UID != "u1" {
		t.Errorf("read from a server without conversion: %v (%+v)", err, m.ObjectMeta)
	}
}
