package liststream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

func TestItems(t *testing.T) {
	item := func(name string, pad int) string {
		return fmt.Sprintf(`{"apiVersion":"v1","kind":"W","metadata":{"name":%q,"namespace":"ns"},"spec":{"pad":%q}}`, name, strings.Repeat("x", pad))
	}
	list := func(items ...string) string {
		return `{"apiVersion":"v1","items":[` + strings.Join(items, ",") + `],"kind":"WList","metadata":{"continue":"next","resourceVersion":"1"}}`
	}
	for _, tc := range []struct {
		name, body string
		want       string
	}{
		{"every item in turn, then the continue token", list(item("a", 10), item("b", 20)), `[ns/a ns/b] "next" <nil>`},
		{"an item just over the bound, read whole", list(item("a", 10), item("big", 1000)), `[ns/a] "" object ns/big is 1091 bytes, more than the limit of 1024`},
		{"an item far over it, named from its beginning", list(item("a", 10), item("huge", 1<<20)), `[ns/a] "" object ns/huge is larger than the limit of 1024 bytes`},
		{"not a list", `[1]`, `[] "" reading the list: got [, want {`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			cont, err := Items(context.Background(), strings.NewReader(tc.body), 1024, func(raw []byte) error {
				got = append(got, ObjectName(raw))
				return nil
			})
			var tooLarge *TooLargeError
			if err != nil && strings.Contains(tc.want, "limit") && !errors.As(err, &tooLarge) {
				t.Errorf("error %T, want a TooLargeError", err)
			}
			if s := fmt.Sprintf("%v %q %v", got, cont, err); s != tc.want {
				t.Errorf("got %v %q %v, want %s", got, cont, err, tc.want)
			}
		})
	}
}

func TestObjectName(t *testing.T) {
	for in, want := range map[string]string{
		`{"apiVersion":"x/v1","kind":"W","metadata":{"annotations":{"name":"no"},"finalizers":["a"],"name":"w","namespace":"ns","uid":"1"},"spec":{`: "ns/w",
		`{"metadata":{"name":"cluster-scoped"},"spec":{"name":"no"}}`:                                                                                "cluster-scoped",
		`{"metadata":{"managedFields":[{"name":"no"}],"name":"w","namespace":"ns"`:                                                                   "ns/w",
		`{"spec":{"metadata":{"name":"no"}},"metadata":{"name":"w"}}`:                                                                                "w",
		`{"apiVersion":"x/v1","kind":"W","metadata":{"annota`:                                                                                        "",
	} {
		if got := ObjectName([]byte(in)); got != want {
			t.Errorf("ObjectName(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestObject(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/apps/v1/namespaces/ns/deployments/web":
			_, _ = io.WriteString(w, `{"kind":"Deployment","metadata":{"name":"web","namespace":"ns"}}`)
		case "/api/v1/nodes/big":
			_, _ = io.WriteString(w, `{"metadata":{"name":"big"},"data":"`+strings.Repeat("x", 200)+`"}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
		}
	}))
	defer srv.Close()
	c, err := New(&rest.Config{Host: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	raw, err := c.Object(ctx, deployments, "ns", "web", 1<<20)
	if err != nil || !strings.Contains(string(raw), `"name":"web"`) {
		t.Fatalf("got %s, %v", raw, err)
	}
	if _, err := c.Object(ctx, deployments, "ns", "gone", 1<<20); !apierrors.IsNotFound(err) {
		t.Errorf("absent object: %v, want NotFound", err)
	}
	var tooLarge *TooLargeError
	if _, err := c.Object(ctx, schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", "big", 100); !errors.As(err, &tooLarge) || tooLarge.Name != "big" {
		t.Errorf("object over the bound: %v", err)
	}
	// Appended after what dst holds, into its room; a failed read leaves
	// dst as it was.
	dst := append(make([]byte, 0, 4096), "keep"...)
	got, err := c.AppendObject(ctx, dst, deployments, "ns", "web", 1<<20)
	if err != nil || string(got) != "keep"+string(raw) || &got[0] != &dst[0] {
		t.Errorf("AppendObject = %q (own buffer: %v), %v", got, &got[0] == &dst[0], err)
	}
	for _, name := range []string{"big", "gone"} {
		if got, err := c.AppendObject(ctx, dst, schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", name, 100); err == nil || string(got) != "keep" {
			t.Errorf("AppendObject of %s = %q, %v; want an error and dst as it was", name, got, err)
		}
	}
	// Names and namespaces from a bundle never walk out of their segment.
	asked := len(paths)
	for _, bad := range [][2]string{{"ns", "../../../api/v1/secrets"}, {"ns", "a/b"}, {"..", "web"}, {"ns/x", "web"}, {"ns", ".."}} {
		if _, err := c.Object(ctx, deployments, bad[0], bad[1], 1<<20); err == nil {
			t.Errorf("namespace %q name %q: read", bad[0], bad[1])
		}
	}
	if len(paths) != asked {
		t.Errorf("requests made for invalid names: %q", paths[asked:])
	}
}
