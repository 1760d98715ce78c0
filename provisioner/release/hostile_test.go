package release

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/internal/heapwatch"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// TestHostileOwnership10x measures, against a real API server, the
// ownership checks under records listing many objects the release does not
// own: an upgrade over a forged record listing 2,000 objects of another
// release, an uninstall of it, and a bundle of 2,000 objects without a
// namespace. Opt-in:
//
//	RUKPAK_HOSTILE_10X=1 KUBEBUILDER_ASSETS=... go test -count=1 -run TestHostileOwnership10x -v ./provisioner/release/
func TestHostileOwnership10x(t *testing.T) {
	if testing.Short() || os.Getenv("RUKPAK_HOSTILE_10X") == "" {
		t.Skip("set RUKPAK_HOSTILE_10X=1 to measure")
	}
	const n = 2000
	env := testenv.Start(t)
	ctx := context.Background()
	for _, ns := range []string{"rukpak-system", "apps"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	m, err := NewManager(env.Config, "rukpak-system")
	if err != nil {
		t.Fatal(err)
	}
	objs := make([]*unstructured.Unstructured, n)
	loose := make([]*unstructured.Unstructured, n)
	for i := range objs {
		objs[i] = configMap("apps", fmt.Sprintf("cm-%04d", i), "other")
		loose[i] = configMap("", fmt.Sprintf("cm-%04d", i), "x")
	}
	if _, err := m.Apply(ctx, "other", objs, nil); err != nil {
		t.Fatal(err)
	}
	forge(t, m, "victim", 1, objs...)

	measure := func(name string, f func() string) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapInuse
		stop := heapwatch.Start()
		start := time.Now()
		outcome := f()
		took := time.Since(start)
		peak := stop()
		t.Logf("%s: %s; heap in use peaked %.1f MiB above the %.1f MiB before; %s", name, outcome,
			float64(peak)/(1<<20), float64(base)/(1<<20), took.Round(time.Millisecond))
	}
	measure(fmt.Sprintf("upgrade over a forged record listing %d objects of another release", n), func() string {
		_, err := m.Apply(ctx, "victim", objs, nil)
		if err == nil {
			t.Fatal("the upgrade took over another release's objects")
		}
		return fmt.Sprintf("refused (%d bytes of error)", len(err.Error()))
	})
	measure(fmt.Sprintf("uninstall of a forged record listing %d objects of another release", n), func() string {
		kept, err := m.Uninstall(ctx, "victim")
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d objects left alone", len(kept))
	})
	measure(fmt.Sprintf("a bundle of %d namespaced objects without a namespace", n), func() string {
		_, err := m.Apply(ctx, "loose", loose, nil)
		if err == nil {
			t.Fatal("objects without a namespace were installed")
		}
		return "refused: " + err.Error()
	})
	list := &corev1.ConfigMapList{}
	if err := env.Client.List(ctx, list, client.InNamespace("apps")); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) < n {
		t.Errorf("%d of another release's %d ConfigMaps left", len(list.Items), n)
	}
}
