package leanmeta

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunShared(m)) }

// A metadata client on Config reads, lists, watches and applies as one on
// the plain config does, without the managed fields.
func TestIntegrationMetadataWithoutManagedFields(t *testing.T) {
	env := testenv.Shared(t)
	ns := testenv.Namespace(t, env, "leanmeta")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	plain, err := metadata.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	lean, err := metadata.NewForConfig(Config(env.Config))
	if err != nil {
		t.Fatal(err)
	}
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")

	w, err := lean.Resource(gvr).Namespace(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// Applied, so the API server records managed fields for every key.
	leanClient, err := client.New(Config(env.Config), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"one", "two"} {
		data := map[string]any{}
		for i := range 200 {
			data[name+string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
		}
		patch := client.RawPatch(types.ApplyPatchType, mustJSON(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"app": name}}, "data": data}))
		answer := &metav1.PartialObjectMetadata{}
		answer.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		answer.SetNamespace(ns)
		answer.SetName(name)
		if err := leanClient.Patch(ctx, answer, patch, client.FieldOwner("leanmeta-test"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
		if answer.UID == "" || answer.ResourceVersion == "" || answer.Labels["app"] != name || answer.ManagedFields != nil {
			t.Fatalf("apply answered %+v", answer.ObjectMeta)
		}
	}

	for _, name := range []string{"one", "two"} {
		want, err := plain.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(want.ManagedFields) == 0 {
			t.Fatal("the API server recorded no managed fields: nothing to drop")
		}
		got, err := lean.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want.ManagedFields = nil
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("get %s (-plain +lean):\n%s", name, d)
		}
	}

	want, err := plain.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := lean.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range want.Items {
		want.Items[i].ManagedFields = nil
	}
	if d := cmp.Diff(want.Items, got.Items); d != "" {
		t.Fatalf("list (-plain +lean):\n%s", d)
	}

	// Absent objects are reported as before.
	if _, err := lean.Resource(gvr).Namespace(ns).Get(ctx, "absent", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get of an absent object: %v", err)
	}

	seen := map[string]bool{}
	for len(seen) < 2 {
		select {
		case ev := <-w.ResultChan():
			m, ok := ev.Object.(*metav1.PartialObjectMetadata)
			if ev.Type != watch.Added || !ok {
				t.Fatalf("event %s %T", ev.Type, ev.Object)
			}
			if m.ManagedFields != nil || m.UID == "" || m.Labels["app"] != m.Name {
				t.Fatalf("watched %+v", m.ObjectMeta)
			}
			seen[m.Name] = true
		case <-ctx.Done():
			t.Fatalf("watch saw %v", seen)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
