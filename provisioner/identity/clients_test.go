package identity

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
)

// Clients are built once per identity and at most size are kept.
func TestClientsBounded(t *testing.T) {
	c, err := NewClients(&rest.Config{Host: "https://127.0.0.1:1"}, meta.NewDefaultRESTMapper(nil), 2)
	if err != nil {
		t.Fatal(err)
	}
	a := ServiceAccount{Namespace: "t", Name: "a"}
	first, err := c.For(a)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := c.For(a)
	if again != first {
		t.Error("a second For built another client")
	}
	for _, name := range []string{"b", "c", "d"} {
		if _, err := c.For(ServiceAccount{Namespace: "t", Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	if c.Len() != 2 {
		t.Errorf("kept %d clients, want 2", c.Len())
	}
	if rebuilt, _ := c.For(a); rebuilt == first {
		t.Error("an evicted client was still kept")
	}
}
