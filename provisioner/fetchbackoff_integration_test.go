package provisioner_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// TestIntegrationFailingFetchesBackOff: a Bundle and a Catalog whose git
// server answers every request with a 500 are fetched again after a
// backoff (2 s, then doubled), not at once: the Catalog's was fetched
// some 1,300 times in 10 s (an outside review).
func TestIntegrationFailingFetchesBackOff(t *testing.T) {
	t.Parallel()
	h, _ := catalogHarness(t)
	ctx := context.Background()
	failing := func() (string, *atomic.Int64) {
		var n atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// One count per fetch: go-git asks for the refs first.
			if r.URL.Query().Get("service") != "" {
				n.Add(1)
			}
			http.Error(w, "boom", http.StatusInternalServerError)
		}))
		t.Cleanup(srv.Close)
		return srv.URL, &n
	}
	src := func(url string) rukpakv1alpha1.BundleSource {
		return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit, Git: &rukpakv1alpha1.GitSource{Repository: url + "/org/repo", Ref: rukpakv1alpha1.GitRef{Branch: "main"}}}
	}
	bURL, bundleFetches := failing()
	cURL, catalogFetches := failing()
	b := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "backoff"}, Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Source: src(bURL)}}
	testenv.MustNotError(t, h.c.Create(ctx, b), "creating bundle")
	c := &rukpakv1alpha1.Catalog{ObjectMeta: metav1.ObjectMeta{Name: "backoff"}, Spec: rukpakv1alpha1.CatalogSpec{Source: src(cURL)}}
	testenv.MustNotError(t, h.c.Create(ctx, c), "creating catalog")
	eventually(t, "both sources fetched", func() error {
		if bundleFetches.Load() == 0 || catalogFetches.Load() == 0 {
			return fmt.Errorf("fetches: Bundle %d, Catalog %d", bundleFetches.Load(), catalogFetches.Load())
		}
		return nil
	})
	// Waits of 2, 4 and 8 s after the first failure: at most three more
	// fetches each in the next 10 s (fewer on a slow machine).
	b0, c0 := bundleFetches.Load(), catalogFetches.Load()
	time.Sleep(10 * time.Second)
	if n := bundleFetches.Load() - b0; n > 3 {
		t.Errorf("the Bundle's failing source was fetched %d more times in 10 s, want at most 3", n)
	}
	if n := catalogFetches.Load() - c0; n > 3 {
		t.Errorf("the Catalog's failing source was fetched %d more times in 10 s, want at most 3", n)
	}
}
