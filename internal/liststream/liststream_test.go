package liststream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
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
