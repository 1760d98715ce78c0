package bundle

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/storage"
	"github.com/rukpak-dev/rukpak/unpack"
)

// TestReplicaCacheRefusesOtherContent: a replica whose unpack yields other
// bytes than the leader recorded in status.contentDigest (the pin in status
// was rewritten, say) does not serve them.
func TestReplicaCacheRefusesOtherContent(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := rukpakv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	const wrong = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
	src := rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps,
		ConfigMaps: []rukpakv1alpha1.ConfigMapSource{{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: "cm"}}}}
	b := &rukpakv1alpha1.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "b", UID: "u", Generation: 1},
		Spec:       rukpakv1alpha1.BundleSpec{ProvisionerClassName: "c", Source: src},
		Status:     rukpakv1alpha1.BundleStatus{ResolvedSource: src.DeepCopy(), ContentDigest: wrong, ObservedGeneration: 1},
	}
	conditions.Set(&b.Status.Conditions, 1, rukpakv1alpha1.TypeUnpacked, metav1.ConditionTrue, rukpakv1alpha1.ReasonUnpackSuccessful, "ok")
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(b).WithStatusSubresource(b).Build()
	store := &storage.LocalDirectory{RootDirectory: t.TempDir()}
	u := unpackerFunc(func(context.Context, *rukpakv1alpha1.Bundle) (*unpack.Result, error) {
		return unpack.Unpacked(fstest.MapFS{"manifests/a.yaml": {Data: []byte("kind: A\n")}}, nil, nil), nil
	})
	rc := &ReplicaCache{Reconciler: &Reconciler{Client: c, Class: "c", Unpacker: u, Storage: store, Handler: passThroughHandler}}

	req := ctrl.Request{NamespacedName: client.ObjectKey{Name: "b"}}
	if _, err := rc.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("first reconcile (starts the fetch): %v", err)
	}
	select {
	case <-rc.background().events:
	case <-time.After(10 * time.Second):
		t.Fatal("the fetch did not finish")
	}
	_, err := rc.Reconcile(context.Background(), req)
	want := `content of bundle "b" unpacked on this replica has digest sha256:`
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), ", not status.contentDigest "+wrong+": not serving it") {
		t.Fatalf("got %v, want %q...", err, want)
	}
	if ok, _ := store.Exists(context.Background(), b); ok {
		t.Fatal("the mismatched copy is still stored")
	}
}

var passThroughHandler = HandlerFunc(func(_ context.Context, fsys fs.FS, _ *rukpakv1alpha1.Bundle) (fs.FS, error) { return fsys, nil })
