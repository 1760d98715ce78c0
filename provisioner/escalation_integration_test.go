package provisioner_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/fstest"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/storage"
	"github.com/rukpak-dev/rukpak/unpack"
	"github.com/rukpak-dev/rukpak/unpack/sources"
)

// requestLog is a handler that records who asked for what.
type requestLog struct {
	mu   sync.Mutex
	seen []string
	next http.Handler
}

func (l *requestLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	l.seen = append(l.seen, r.URL.Path+" "+r.Header.Get("Authorization"))
	l.mu.Unlock()
	l.next.ServeHTTP(w, r)
}

func (l *requestLog) requests() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

// TestIntegrationStatusCannotRedirectContent is the escalation through
// bundles/status: a generated Bundle of a class this process does not run
// (registry) gets a forged status (Unpacked, contentURL of the attacker's
// https server, the digest of the attacker's content, which grants
// cluster-admin). The plain provisioner downloads only from its configured
// content service, with a content-audience token, so the attacker's server
// is never contacted and nothing is installed.
func TestIntegrationStatusCannotRedirectContent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.kill() // this test runs a plain-only provisioner
	ctx := context.Background()

	// The attacker's content, served over https with the same test
	// certificate the content service has (so TLS trust is no defence
	// here: only the URL is).
	attackerDir := t.TempDir()
	evil := fstest.MapFS{"manifests/crb.yaml": {Data: []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: evil-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: User, name: mallory, apiGroup: rbac.authorization.k8s.io}]
`)}}
	attackerLog := &requestLog{next: storage.NewFileHandler(attackerDir)}
	attacker := httptest.NewTLSServer(attackerLog)
	t.Cleanup(attacker.Close)
	// The registry-class process's content service: it has not stored the
	// Bundle (it never unpacked it).
	serviceLog := &requestLog{next: storage.NewFileHandler(t.TempDir())}
	service := httptest.NewTLSServer(serviceLog)
	t.Cleanup(service.Close)

	httpClient, err := storage.NewHTTPClient(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: service.Certificate().Raw}))
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	token := enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(`{"aud":["`+storage.DefaultContentAudience+`"]}`)) + ".c2ln"
	local := &storage.LocalDirectory{RootDirectory: t.TempDir(), BaseURL: "https://plain.test"}
	loader, err := storage.NewFallbackLoader(local, "https://plain.test", httpClient, func() (string, error) { return token, nil })
	if err != nil {
		t.Fatal(err)
	}
	loader.Audience = storage.DefaultContentAudience
	loader.ClassBaseURLs = map[string]string{rukpakv1alpha1.ProvisionerClassRegistry: service.URL}

	mgr, err := ctrl.NewManager(h.env.Config, manager.Options{
		Scheme:                 h.env.Env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := provisioner.Setup(mgr, provisioner.Options{
		Classes:   []string{rukpakv1alpha1.ProvisionerClassPlain},
		Namespace: namespace,
		Unpacker:  sources.New(unpack.Config{Reader: mgr.GetAPIReader(), Namespace: namespace, BaseDir: t.TempDir()}),
		Storage:   local,
		Loader:    loader,
	}); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	bd := newBD("victim", rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage,
		Image: &rukpakv1alpha1.ImageSource{Ref: "registry.invalid/operator-bundle:v1"}})
	bd.Spec.Template.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	if err := h.c.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}
	var generated *rukpakv1alpha1.Bundle
	eventually(t, "the generated Bundle", func() error {
		list := &rukpakv1alpha1.BundleList{}
		if err := h.c.List(ctx, list, client.MatchingLabels{rukpakv1alpha1.LabelOwnerName: "victim"}); err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d generated Bundles", len(list.Items))
		}
		generated = &list.Items[0]
		return nil
	})

	// The forged status, with the attacker's content stored under the
	// Bundle's name on their server.
	if err := (&storage.LocalDirectory{RootDirectory: attackerDir}).Store(ctx, generated, evil); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(attackerDir, generated.Name+".tgz"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	generated.Status.Phase = rukpakv1alpha1.PhaseUnpacked
	generated.Status.ObservedGeneration = generated.Generation
	generated.Status.ContentURL = attacker.URL + "/bundles/" + generated.Name + ".tgz"
	generated.Status.ContentDigest = "sha256:" + hex.EncodeToString(sum[:])
	generated.Status.ResolvedSource = generated.Spec.Source.DeepCopy()
	conditions.Set(&generated.Status.Conditions, generated.Generation, rukpakv1alpha1.TypeUnpacked, metav1.ConditionTrue, rukpakv1alpha1.ReasonUnpackSuccessful, "Successfully unpacked the bundle")
	if err := h.c.Status().Update(ctx, generated); err != nil {
		t.Fatal(err)
	}

	want := fmt.Sprintf("Failed to load content of bundle %q: loading content of bundle %q from %s/bundles/%s.tgz: server answered 404 Not Found: 404 page not found",
		generated.Name, generated.Name, service.URL, generated.Name)
	h.waitBD("victim", rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonBundleLoadFailed, want)

	if got := attackerLog.requests(); len(got) != 0 {
		t.Fatalf("the attacker's server was contacted: %q", got)
	}
	if got := serviceLog.requests(); len(got) == 0 || got[0] != "/bundles/"+generated.Name+".tgz Bearer "+token {
		t.Fatalf("the content service got %q, want a request with the content-audience token", got)
	}
	err = h.c.Get(ctx, client.ObjectKey{Name: "evil-admin"}, &rbacv1.ClusterRoleBinding{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("ClusterRoleBinding evil-admin: got %v, want it never installed", err)
	}
}
