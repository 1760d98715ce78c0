package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/shard"
	"github.com/rukpak-dev/rukpak/storage"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/sources"
	"github.com/rukpak-dev/rukpak/unpack/upload"
)

// setupUploads registers the upload source with unpacker and returns the
// upload handler the content server mounts at upload.Path. The archives of
// Bundles deleted while no provisioner ran are swept once this replica
// leads (the finalizer removes the others).
func setupUploads(mgr ctrl.Manager, o options, limits unpack.Limits, classes []string, sh *shard.Shard, unpacker *sources.Unpacker) (*upload.Handler, error) {
	dir := o.uploadDir
	if dir == "" {
		dir = filepath.Join(o.storageDir, "uploads")
	}
	store, err := upload.NewStore(dir, limits)
	if err != nil {
		return nil, err
	}
	unpacker.Register(rukpakv1alpha1.SourceTypeUpload, &upload.Unpacker{Store: store, BaseDir: o.unpackDir})
	authn, authz, err := storage.NewDelegatingAuth(mgr.GetConfig(), []string{o.contentAudience})
	if err != nil {
		return nil, fmt.Errorf("creating upload authentication: %w", err)
	}
	elected := mgr.Elected()
	reader := mgr.GetAPIReader()
	h := upload.NewHandler(upload.Handler{
		Store: store,
		Authn: authn,
		Authz: authz,
		// From the API server, not the cache: the Bundle was usually
		// created a moment ago, by the same client that uploads.
		GetBundle: func(ctx context.Context, name string) (*rukpakv1alpha1.Bundle, error) {
			b := &rukpakv1alpha1.Bundle{}
			if err := reader.Get(ctx, client.ObjectKey{Name: name}, b); err != nil {
				return nil, err
			}
			return b, nil
		},
		Serves: func(b *rukpakv1alpha1.Bundle) bool {
			return slices.Contains(classes, b.Spec.ProvisionerClassName) && sh.Owns(b.Labels)
		},
		Leader: func() bool {
			select {
			case <-elected:
				return true
			default:
				return false
			}
		},
		Timeout: o.uploadTimeout,
		Scratch: filepath.Join(o.unpackDir, "upload-check"),
		Log:     ctrl.Log.WithName("upload"),
	}, o.maxUploads)
	// A leader-only runnable: only the leader keeps uploads.
	err = mgr.Add(leaderRunnable(func(ctx context.Context) error {
		list := &rukpakv1alpha1.BundleList{}
		listedAt := time.Now()
		if err := reader.List(ctx, list); err != nil {
			ctrl.Log.WithName("upload").Error(err, "listing bundles to sweep uploads")
			return nil
		}
		uids := make([]types.UID, 0, len(list.Items))
		for _, b := range list.Items {
			uids = append(uids, b.UID)
		}
		n, err := store.Sweep(upload.KeepUIDs(uids), listedAt, time.Minute)
		if err != nil {
			ctrl.Log.WithName("upload").Error(err, "sweeping uploads")
		} else if n > 0 {
			ctrl.Log.WithName("upload").Info("removed the uploads of deleted bundles", "count", n)
		}
		return nil
	}))
	return h, err
}

// leaderRunnable runs f once this replica leads.
type leaderRunnable func(ctx context.Context) error

func (f leaderRunnable) Start(ctx context.Context) error { return f(ctx) }
func (f leaderRunnable) NeedLeaderElection() bool        { return true }
