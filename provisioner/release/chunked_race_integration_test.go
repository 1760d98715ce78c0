package release

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// beforeGet runs hook before each Get of a Secret whose name has the
// prefix, so a test can make a writer act at a chosen point of a read.
type beforeGet struct {
	corev1client.SecretInterface
	prefix string
	hook   func(name string)
}

func (b *beforeGet) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error) {
	if strings.HasPrefix(name, b.prefix) {
		b.hook(name)
	}
	return b.SecretInterface.Get(ctx, name, opts)
}

// A reader between two chunks while a writer rewrites the record (new
// chunks, index switched, old chunks swept) or deletes it must read the
// record as it is now, not report a chunk missing.
func TestIntegrationChunkedReadDuringRewrite(t *testing.T) {
	t.Parallel()
	e := newChunkEnv(t)
	const name = "race"
	k := recordKey(name, 1)
	v1 := record(name, 1, 3<<20, helmrelease.StatusDeployed)
	if err := e.d.Create(k, v1); err != nil {
		t.Fatal(err)
	}
	// The rewritten revision: other content (so other chunks), superseded.
	v1b := record(name, 1, 3<<20+1, helmrelease.StatusSuperseded)

	// reader is a second driver on the same API server whose reads let the
	// writer (e.d) act just before the second chunk of the digest it
	// started with is fetched.
	reader := func(act func()) *chunkedSecrets {
		digest := e.secret(k).Labels[labelDigest]
		var once sync.Once
		r := *e.d
		r.secrets = &beforeGet{SecretInterface: e.d.secrets, prefix: chunkName(k, digest, 2), hook: func(string) { once.Do(act) }}
		return &r
	}

	t.Run("Get while the record is rewritten", func(t *testing.T) {
		r := reader(func() {
			if err := e.d.Update(k, v1b); err != nil {
				t.Error(err)
			}
		})
		got, err := r.Get(k)
		if err != nil {
			t.Fatalf("Get during a rewrite: %v", err)
		}
		sameRelease(t, got, v1b)
		if got.Labels["status"] != "" {
			t.Errorf("Get returned system labels: %v", got.Labels)
		}
	})

	t.Run("Query and List while the record is rewritten", func(t *testing.T) {
		r := reader(func() {
			if err := e.d.Update(k, v1); err != nil {
				t.Error(err)
			}
		})
		got, err := r.Query(map[string]string{"name": name, "owner": "helm"})
		if err != nil || len(got) != 1 {
			t.Fatalf("Query during a rewrite: %d releases, %v", len(got), err)
		}
		sameRelease(t, got[0], v1)
		if got[0].Labels["status"] != "deployed" {
			t.Errorf("labels of the record read: %v, want those of the rewritten index", got[0].Labels)
		}

		r = reader(func() {
			if err := e.d.Update(k, v1b); err != nil {
				t.Error(err)
			}
		})
		all, err := r.List(func(*helmrelease.Release) bool { return true })
		if err != nil || len(all) != 1 {
			t.Fatalf("List during a rewrite: %d releases, %v", len(all), err)
		}
		sameRelease(t, all[0], v1b)
	})

	t.Run("Get and Query while the record is deleted", func(t *testing.T) {
		r := reader(func() {
			if _, err := e.d.Delete(k); err != nil {
				t.Error(err)
			}
		})
		if _, err := r.Get(k); !errors.Is(err, driver.ErrReleaseNotFound) {
			t.Errorf("Get during a delete: %v, want ErrReleaseNotFound", err)
		}
		if err := e.d.Create(k, v1); err != nil {
			t.Fatal(err)
		}
		r = reader(func() {
			if _, err := e.d.Delete(k); err != nil {
				t.Error(err)
			}
		})
		if _, err := r.Query(map[string]string{"name": name, "owner": "helm"}); !errors.Is(err, driver.ErrReleaseNotFound) {
			t.Errorf("Query during a delete: %v, want ErrReleaseNotFound", err)
		}
	})
}

// Readers running freely against a writer that keeps rewriting a chunked
// record always read one of the revisions written, never an error.
func TestIntegrationChunkedReadersWithConcurrentWriter(t *testing.T) {
	t.Parallel()
	e := newChunkEnv(t)
	const name = "busy"
	k := recordKey(name, 1)
	versions := []*helmrelease.Release{
		record(name, 1, 3<<20, helmrelease.StatusDeployed),
		record(name, 1, 3<<20+1, helmrelease.StatusSuperseded),
	}
	if err := e.d.Create(k, versions[0]); err != nil {
		t.Fatal(err)
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer done.Store(true)
		for i := 1; i <= 8; i++ {
			if err := e.d.Update(k, versions[i%2]); err != nil {
				t.Errorf("update %d: %v", i, err)
				return
			}
		}
	}()
	var reads atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				got, err := e.d.Get(k)
				if err != nil {
					t.Errorf("Get with a concurrent writer: %v", err)
					return
				}
				if got.Manifest != versions[0].Manifest && got.Manifest != versions[1].Manifest {
					t.Errorf("Get read a manifest of %d bytes that was never written", len(got.Manifest))
					return
				}
				reads.Add(1)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d reads during 8 rewrites", reads.Load())
}
