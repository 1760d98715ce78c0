package release

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// TestIntegrationRecoversInterruptedRelease plays a provisioner that died in
// the middle of an install: the release record is left pending-install,
// which with Helm's own actions blocks every later action with "another
// operation is in progress". The next Apply must supersede it.
func TestIntegrationRecoversInterruptedRelease(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	ctx := context.Background()
	ns, apps := testenv.Namespace(t, env, "rukpak-system"), testenv.Namespace(t, env, "apps")
	m, err := NewManager(env.Config, ns)
	if err != nil {
		t.Fatal(err)
	}
	crashed := &helmrelease.Release{
		Name: "crashed", Namespace: ns, Version: 1, Chart: emptyChart("crashed"),
		Info: &helmrelease.Info{Status: helmrelease.StatusPendingInstall},
	}
	if err := m.store.Create(crashed); err != nil {
		t.Fatal(err)
	}

	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "after-crash", "namespace": apps},
		"data":     map[string]any{"k": "v"},
	}}
	res, err := m.Apply(ctx, "crashed", []*unstructured.Unstructured{cm}, nil)
	if err != nil {
		t.Fatalf("apply after an interrupted install: %v", err)
	}
	if res.Release.Version != 2 || !res.Changed {
		t.Errorf("release revision %d, changed %v; want a new revision 2", res.Release.Version, res.Changed)
	}
	hist, err := m.store.History("crashed")
	if err != nil {
		t.Fatal(err)
	}
	status := map[int]helmrelease.Status{}
	for _, r := range hist {
		status[r.Version] = r.Info.Status
	}
	if status[1] != helmrelease.StatusFailed || status[2] != helmrelease.StatusDeployed {
		t.Errorf("release history %v, want 1 failed and 2 deployed", status)
	}

	// Applying the same objects again changes nothing and writes nothing.
	again, err := m.Apply(ctx, "crashed", []*unstructured.Unstructured{cm}, nil)
	if err != nil || again.Changed || again.Release.Version != 2 {
		t.Errorf("re-apply: changed %v, revision %d, err %v", again.Changed, again.Release.Version, err)
	}

	if _, err := m.Uninstall(ctx, "crashed"); err != nil {
		t.Fatal(err)
	}
	err = env.Client.Get(ctx, client.ObjectKey{Namespace: apps, Name: "after-crash"}, &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("uninstall left the ConfigMap: %v", err)
	}
}

// In a namespace crowded with other objects the ownership check still finds
// an object that belongs to nobody, wherever its name sorts, and still lets
// a release take its own objects.
func TestIntegrationOwnershipInCrowdedNamespace(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	ctx := context.Background()
	ns, crowded := testenv.Namespace(t, env, "rukpak-system"), testenv.Namespace(t, env, "crowded")
	m, err := NewManager(env.Config, ns)
	if err != nil {
		t.Fatal(err)
	}
	// 200 bystanders: more than listFactor times any release below.
	for i := range 200 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: crowded, Name: fmt.Sprintf("bystander-%03d", i)}}
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: crowded, Name: "zz-foreign"}, Data: map[string]string{"owner": "someone"}}
	if err := env.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	objs := func(names ...string) []*unstructured.Unstructured {
		var out []*unstructured.Unstructured
		for _, n := range names {
			out = append(out, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": n, "namespace": crowded},
				"data":     map[string]any{"owner": "release"},
			}})
		}
		return out
	}
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("mine-%02d", i))
	}

	if _, err := m.Apply(ctx, "mine", objs(names...), nil); err != nil {
		t.Fatalf("installing into a crowded namespace: %v", err)
	}
	// The same names again, in a second revision: they are the release's own.
	if _, err := m.Apply(ctx, "mine", objs(append(names, "mine-10")...), nil); err != nil {
		t.Fatalf("upgrading in a crowded namespace: %v", err)
	}

	_, err = m.Apply(ctx, "other", objs(append(slices.Clone(names[:9]), "zz-foreign")...), nil)
	if err == nil || !strings.Contains(err.Error(), "ConfigMap "+crowded+"/zz-foreign exists and is not managed by this release") {
		t.Fatalf("taking over a foreign object: got %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), foreign); err != nil || foreign.Data["owner"] != "someone" {
		t.Errorf("the foreign ConfigMap was changed: %v %v", foreign.Data, err)
	}
}
