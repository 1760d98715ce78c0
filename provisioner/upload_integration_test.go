package provisioner_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"testing/fstest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner"
	"github.com/rukpak-dev/rukpak/storage"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/sources"
	"github.com/rukpak-dev/rukpak/unpack/upload"
)

// TestIntegrationUploadSource: an upload Bundle waits for its content, is
// unpacked and format-checked as any source's content once it arrives,
// pins the uploaded digest in status.resolvedSource, and its deletion
// removes the upload.
func TestIntegrationUploadSource(t *testing.T) {
	t.Parallel()
	store, err := upload.NewStore(t.TempDir(), unpack.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, func(o *provisioner.Options) {
		o.Unpacker.(*sources.Unpacker).Register(rukpakv1alpha1.SourceTypeUpload, &upload.Unpacker{Store: store, BaseDir: t.TempDir()})
	})
	ctx := context.Background()
	put := func(b *rukpakv1alpha1.Bundle, files fstest.MapFS) string {
		t.Helper()
		var buf bytes.Buffer
		if err := storage.WriteArchive(ctx, &buf, files); err != nil {
			t.Fatal(err)
		}
		rec, err := store.Receive(ctx, &buf, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if res, _, err := store.Commit(b.UID, rec, ""); err != nil || res != upload.Created {
			t.Fatalf("commit: %v %v", res, err)
		}
		return rec.Digest
	}
	newBundle := func(name string) *rukpakv1alpha1.Bundle {
		t.Helper()
		b := &rukpakv1alpha1.Bundle{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Source: rukpakv1alpha1.BundleSource{
				Type: rukpakv1alpha1.SourceTypeUpload, Upload: &rukpakv1alpha1.UploadSource{},
			}},
		}
		if err := h.c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		// Uploads are taken once the finalizer is there (the upload
		// service answers 503 before).
		eventually(t, "the finalizer of "+name, func() error {
			b = h.bundle(name)
			if !controllerutil.ContainsFinalizer(b, rukpakv1alpha1.FinalizerDeleteCachedBundle) {
				return fmt.Errorf("no finalizer yet")
			}
			return nil
		})
		return b
	}

	good := newBundle("uploaded")
	if b := h.bundle("uploaded"); b.Status.Phase == rukpakv1alpha1.PhaseUnpacked {
		t.Fatal("unpacked before anything was uploaded")
	}
	digest := put(good, fstest.MapFS{"manifests/cm.yaml": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: default\n")}})
	b := h.waitBundle("uploaded", rukpakv1alpha1.PhaseUnpacked, rukpakv1alpha1.ReasonUnpackSuccessful, "")
	if rs := b.Status.ResolvedSource; rs == nil || rs.Type != rukpakv1alpha1.SourceTypeUpload || rs.Upload == nil || rs.Upload.Digest != digest {
		t.Fatalf("resolvedSource %+v, want the upload's digest %s", rs, digest)
	}

	bad := newBundle("uploaded-invalid")
	put(bad, fstest.MapFS{"README.md": {Data: []byte("no manifests here\n")}})
	h.waitBundle("uploaded-invalid", rukpakv1alpha1.PhaseFailing, rukpakv1alpha1.ReasonUnpackFailed, "manifests")

	for _, b := range []*rukpakv1alpha1.Bundle{good, bad} {
		if err := h.c.Delete(ctx, b); err != nil {
			t.Fatal(err)
		}
		eventually(t, "bundle "+b.Name+" deleted", func() error {
			_, err := h.getBundle(b.Name)
			return err
		})
		if store.Has(b.UID) {
			t.Fatalf("the upload of deleted bundle %s is still stored", b.Name)
		}
	}
}
