package certs

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// TestSecretWriterRunsOnEveryReplica runs the writer in a manager that
// never becomes leader (another holder keeps the Lease): it must still
// write the Secret's certificates, or a second replica never serves.
func TestSecretWriterRunsOnEveryReplica(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := "default"
	now := metav1.NewMicroTime(time.Now())
	testenv.MustNotError(t, env.Client.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "writer-test"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("another-replica"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now,
		},
	}), "creating the Lease")
	cert, key := keyPair(t)
	testenv.MustNotError(t, env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "certs"},
		Data:       map[string][]byte{CertFile: cert, KeyFile: key, CAFile: cert},
	}), "creating the Secret")

	mgr, err := manager.New(env.Config, manager.Options{
		Scheme:                  testenv.Scheme(),
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		LeaderElection:          true,
		LeaderElectionID:        "writer-test",
		LeaderElectionNamespace: ns,
	})
	testenv.MustNotError(t, err, "creating the manager")
	dir := t.TempDir()
	w := &SecretWriter{Secret: types.NamespacedName{Namespace: ns, Name: "certs"}, Dir: dir}
	testenv.MustNotError(t, w.SetupWithManager(mgr), "setting up the writer")
	go func() { _ = mgr.Start(ctx) }()

	select {
	case <-w.Ready():
	case <-mgr.Elected():
		t.Fatal("the manager became leader; the test needs a replica that is not")
	case <-time.After(30 * time.Second):
		t.Fatal("a replica that is not the leader wrote no certificate in 30s")
	}
	got, err := os.ReadFile(filepath.Join(dir, CertFile))
	testenv.MustNotError(t, err, "reading the written certificate")
	if string(got) != string(cert) {
		t.Error("the written certificate is not the Secret's")
	}
}
