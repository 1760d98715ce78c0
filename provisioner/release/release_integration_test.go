package release

import (
	"context"
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
	env := testenv.Start(t)
	ctx := context.Background()
	const ns = "rukpak-system"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
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
		"metadata": map[string]any{"name": "after-crash", "namespace": "default"},
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

	if err := m.Uninstall(ctx, "crashed"); err != nil {
		t.Fatal(err)
	}
	err = env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "after-crash"}, &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("uninstall left the ConfigMap: %v", err)
	}
}
