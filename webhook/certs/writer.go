package certs

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Keys of the certificate Secret, as written by cert-controller.
const (
	CertFile = corev1.TLSCertKey       // tls.crt
	KeyFile  = corev1.TLSPrivateKeyKey // tls.key
	CAFile   = "ca.crt"
)

// SecretWriter keeps Dir in step with the serving certificate in Secret, so
// the webhook server needs no Secret volume (and works outside a Pod, as in
// `make run`). It runs on every replica, leader or not.
type SecretWriter struct {
	Secret types.NamespacedName
	Dir    string

	cache      cache.Cache
	readyInit  sync.Once
	ready      chan struct{}
	readyClose sync.Once
	mu         sync.Mutex // serialises writes from informer callbacks
}

// SetupWithManager adds a cache watching only Secret, and the writer, to mgr.
func (w *SecretWriter) SetupWithManager(mgr manager.Manager) error {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(),
		Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {
			Namespaces: map[string]cache.Config{w.Secret.Namespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", w.Secret.Name),
		}},
	})
	if err != nil {
		return fmt.Errorf("creating cache for Secret %s: %w", w.Secret, err)
	}
	w.cache = c
	// A bare cache is a leader-election runnable to the manager: it would
	// never start on the other replicas, and they would never get files.
	if err := mgr.Add(everyReplica{c}); err != nil {
		return fmt.Errorf("adding cache for Secret %s: %w", w.Secret, err)
	}
	return mgr.Add(w)
}

// Ready is closed once Dir first holds a valid key pair.
func (w *SecretWriter) Ready() <-chan struct{} {
	w.readyInit.Do(func() { w.ready = make(chan struct{}) })
	return w.ready
}

// NeedLeaderElection is false: every replica serves, so every replica needs
// the files.
func (w *SecretWriter) NeedLeaderElection() bool { return false }

// Start writes the Secret's certificates whenever it changes, until ctx ends.
func (w *SecretWriter) Start(ctx context.Context) error {
	log := ctrllog.FromContext(ctx).WithName("cert-writer").WithValues("secret", w.Secret, "dir", w.Dir)
	if err := os.MkdirAll(w.Dir, 0o700); err != nil {
		return fmt.Errorf("creating certificate directory: %w", err)
	}
	inf, err := w.cache.GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return fmt.Errorf("getting informer for Secret %s: %w", w.Secret, err)
	}
	onChange := func(obj any) {
		s, ok := obj.(*corev1.Secret)
		if !ok || s.Name != w.Secret.Name || s.Namespace != w.Secret.Namespace {
			return
		}
		w.write(log, s)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    onChange,
		UpdateFunc: func(_, obj any) { onChange(obj) },
	})
	if err != nil {
		return fmt.Errorf("watching Secret %s: %w", w.Secret, err)
	}
	<-ctx.Done()
	return inf.RemoveEventHandler(reg)
}

func (w *SecretWriter) write(log logr.Logger, s *corev1.Secret) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cert, key := s.Data[CertFile], s.Data[KeyFile]
	if len(cert) == 0 || len(key) == 0 {
		log.V(1).Info("Secret has no serving certificate yet")
		return
	}
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		log.Error(err, "Secret holds an invalid key pair; waiting for the rotator to replace it")
		return
	}
	changed := false
	// The key goes first: the server reloads on each file event and skips a
	// mismatched pair, so the pair is consistent after the second write.
	for _, f := range []struct {
		name string
		data []byte
	}{{KeyFile, key}, {CertFile, cert}, {CAFile, s.Data[CAFile]}} {
		c, err := writeIfChanged(filepath.Join(w.Dir, f.name), f.data)
		if err != nil {
			log.Error(err, "writing certificate file")
			return
		}
		changed = changed || c
	}
	if changed {
		log.Info("wrote serving certificate")
	}
	w.Ready()
	w.readyClose.Do(func() { close(w.ready) })
}

// writeIfChanged atomically replaces path with data unless it already holds
// it, so readers never see a half-written file.
func writeIfChanged(path string, data []byte) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return false, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return false, fmt.Errorf("creating temporary file for %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return false, fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return false, fmt.Errorf("replacing %s: %w", path, err)
	}
	return true, nil
}

// everyReplica runs a cache on every replica, leader or not.
type everyReplica struct{ cache.Cache }

func (everyReplica) NeedLeaderElection() bool { return false }
