package leanclient

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// A bundle's ConfigMap whose namespace is "<ns>?fieldManager=...&" and
// whose name is <ns> must not become PATCH
// /api/v1/namespaces/<ns>?fieldManager=..., an apply to the Namespace
// object <ns> (whose name matches the body's): the namespace is escaped as
// one path segment, and the apply is refused. (controller-runtime's List
// of that namespace, release.existing's for a group of objects, answers an
// empty, complete list, so no ownership read would stop it.)
func TestIntegrationNamespaceInjection(t *testing.T) {
	env := testenv.Shared(t)
	victim := testenv.Namespace(t, env, "review-victim")
	ctx := context.Background()
	lean := newLean(t, env.Config)
	hostileNS := victim + "?fieldManager=evil&force=true&fieldValidation=Ignore&x="

	// What release.existing would see for the group in that namespace.
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	lerr := env.Client.List(ctx, list, client.InNamespace(hostileNS), client.Limit(8))
	t.Logf("List in %q: err=%v items=%d continue=%q", hostileNS, lerr, len(list.Items), list.Continue)

	body := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + victim + `","namespace":"` + hostileNS +
		`","labels":{"pod-security.kubernetes.io/enforce":"privileged"}},"data":{"k":"v"}}`)
	perr := lean.Patch(ctx, configMap(hostileNS, victim), client.RawPatch(types.ApplyPatchType, body),
		client.FieldOwner("rukpak"), client.ForceOwnership, client.FieldValidation(metav1.FieldValidationIgnore))
	t.Logf("apply: %v", perr)
	ns := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: victim}, ns); err != nil {
		t.Fatal(err)
	}
	if v, ok := ns.Labels["pod-security.kubernetes.io/enforce"]; ok {
		t.Errorf("Namespace %s labelled by a ConfigMap's apply: enforce=%q, managed fields %+v", victim, v, ns.ManagedFields)
	}
	if perr == nil {
		t.Errorf("an apply in namespace %q succeeded", hostileNS)
	}
}

// RBAC names are validated as path segments only, so ClusterRole
// "review:a?b" is a valid object (controller-runtime's client reads and
// applies it), and the lean client applies and reads it as itself, not
// clusterroles/review:a with "b?fieldManager=..." as the query.
func TestIntegrationRBACNameWithQueryCharacter(t *testing.T) {
	env := testenv.Shared(t)
	ctx := context.Background()
	lean := newLean(t, env.Config)
	for _, name := range []string{"review:a?b", "review:c#d"} {
		gvk := rbacv1.SchemeGroupVersion.WithKind("ClusterRole")
		body := []byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"` + name + `"},"rules":[]}`)
		// controller-runtime's client: fine.
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(body); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Patch(ctx, u, client.RawPatch(types.ApplyPatchType, body), client.FieldOwner("review"), client.ForceOwnership); err != nil {
			t.Fatalf("controller-runtime apply of %q: %v", name, err)
		}
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		m.Name = name
		if err := lean.Patch(ctx, m, client.RawPatch(types.ApplyPatchType, body), client.FieldOwner("review"), client.ForceOwnership); err != nil {
			t.Errorf("lean apply of %q: %v", name, err)
		}
		got := &metav1.PartialObjectMetadata{}
		got.SetGroupVersionKind(gvk)
		if err := lean.Get(ctx, client.ObjectKey{Name: name}, got); err != nil || got.Name != name {
			t.Errorf("lean read of %q: %v, read %q", name, err, got.Name)
		}
	}
}
