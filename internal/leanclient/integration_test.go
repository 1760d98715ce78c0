package leanclient

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/internal/leanmeta"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunShared(m)) }

// newLean is a lean client on cfg, as the provisioner makes them.
func newLean(t *testing.T, cfg *rest.Config) *Client {
	t.Helper()
	hc, err := rest.HTTPClientFor(leanmeta.Config(cfg))
	testenv.MustNotError(t, err, "creating the HTTP client")
	cc, err := client.New(cfg, client.Options{HTTPClient: hc})
	testenv.MustNotError(t, err, "creating the client")
	c, err := New(cc, cfg, hc)
	testenv.MustNotError(t, err, "creating the lean client")
	return c
}

// Against a real API server (protobuf answers, without managed fields
// through leanmeta): reads and applies answer as controller-runtime's
// client does, and its errors are the API server's.
func TestIntegrationAsControllerRuntime(t *testing.T) {
	env := testenv.Shared(t)
	ns := testenv.Namespace(t, env, "leanclient")
	ctx := context.Background()
	lean := newLean(t, env.Config)

	if err := lean.Get(ctx, client.ObjectKey{Namespace: ns, Name: "absent"}, configMap("", "")); !apierrors.IsNotFound(err) {
		t.Fatalf("absent: %v", err)
	}
	applied := configMap(ns, "cm")
	body := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"` + ns + `","labels":{"a":"b"},"annotations":{"c":"d"}},"data":{"k":"v"}}`)
	if err := lean.Patch(ctx, applied, client.RawPatch(types.ApplyPatchType, body), client.FieldOwner("leanclient-test"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	want := &metav1.PartialObjectMetadata{}
	want.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cm"}, want); err != nil {
		t.Fatal(err)
	}
	got := configMap("", "")
	if err := lean.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cm"}, got); err != nil {
		t.Fatal(err)
	}
	for what, m := range map[string]*metav1.PartialObjectMetadata{"apply's answer": applied, "read": got} {
		if m.UID != want.UID || m.ResourceVersion != want.ResourceVersion || m.Labels["a"] != "b" || m.Annotations["c"] != "d" ||
			m.ManagedFields != nil || m.GroupVersionKind() != corev1.SchemeGroupVersion.WithKind("ConfigMap") {
			t.Errorf("%s: %+v, want %+v without managed fields", what, m, want)
		}
	}
	// Another manager's apply of a field without force conflicts.
	other := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"` + ns + `"},"data":{"k":"w"}}`)
	if err := lean.Patch(ctx, configMap(ns, "cm"), client.RawPatch(types.ApplyPatchType, other), client.FieldOwner("someone-else")); !apierrors.IsConflict(err) {
		t.Errorf("conflicting apply: %v", err)
	}
	// An identity without rights is refused by the API server.
	nobody := rest.CopyConfig(env.Config)
	nobody.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":nobody"}
	if err := newLean(t, nobody).Get(ctx, client.ObjectKey{Namespace: ns, Name: "cm"}, configMap("", "")); !apierrors.IsForbidden(err) {
		t.Errorf("read as an identity without rights: %v", err)
	}
}
