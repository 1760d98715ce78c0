package provisioner_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner"
	"github.com/rukpak-dev/rukpak/storage"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/sources"
)

// TestIntegrationTwoReplicas runs two provisioner replicas with leader
// election, each with its own (emptyDir-like) storage, as two pods of the
// Deployment would. Only the leader reconciles status, yet both must serve a
// Bundle's content, since a Service may send a download to either.
func TestIntegrationTwoReplicas(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.kill() // this test runs its own replicas
	ctx := context.Background()

	type replica struct{ storeDir string }
	var replicas []replica
	for i := range 2 {
		r := replica{storeDir: t.TempDir()}
		replicas = append(replicas, r)
		mgr, err := ctrl.NewManager(h.env.Config, manager.Options{
			Scheme:                  h.env.Env.Scheme,
			Metrics:                 metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress:  "0",
			LeaderElection:          true,
			LeaderElectionID:        "provisioner.core.rukpak.io",
			LeaderElectionNamespace: namespace,
			Controller:              config.Controller{SkipNameValidation: ptr.To(true)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := provisioner.Setup(mgr, provisioner.Options{
			Classes:   []string{rukpakv1alpha1.ProvisionerClassPlain},
			Namespace: namespace,
			Unpacker:  sources.New(unpack.Config{Reader: mgr.GetAPIReader(), Namespace: namespace, BaseDir: t.TempDir()}),
			Storage:   &storage.LocalDirectory{RootDirectory: r.storeDir, BaseURL: fmt.Sprintf("https://replica-%d.test", i)},
		}); err != nil {
			t.Fatal(err)
		}
		mctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- mgr.Start(mctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Logf("replica %d stopped: %v", i, err)
			}
		})
	}

	src := h.pushBundle("replicated", map[string]string{"manifests/cm.yaml": configMap("replicated", "1")})
	b := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "replicated"}, Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Source: src}}
	if err := h.c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	h.waitBundle("replicated", rukpakv1alpha1.PhaseUnpacked, rukpakv1alpha1.ReasonUnpackSuccessful, "")

	read := func(r replica) ([]byte, error) { return os.ReadFile(filepath.Join(r.storeDir, "replicated.tgz")) }
	eventually(t, "both replicas to store the content", func() error {
		var archives [][]byte
		for i, r := range replicas {
			data, err := read(r)
			if err != nil {
				return fmt.Errorf("replica %d: %w", i, err)
			}
			archives = append(archives, data)
		}
		if !bytes.Equal(archives[0], archives[1]) {
			return fmt.Errorf("replicas store different bytes")
		}
		return nil
	})

	if err := h.c.Delete(ctx, h.bundle("replicated")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both replicas to drop the content", func() error {
		for i, r := range replicas {
			if _, err := read(r); err == nil {
				return fmt.Errorf("replica %d still stores it", i)
			}
		}
		return nil
	})
}
