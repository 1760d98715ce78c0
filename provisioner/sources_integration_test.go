package provisioner_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testgit"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
)

// TestIntegrationSources unpacks Bundles from every git ref kind, a
// directory, and ConfigMaps, through the real reconciler.
func TestIntegrationSources(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()

	root := testgit.NewRoot(t)
	repo := root.NewRepo("bundles")
	repo.WriteFiles(map[string]string{"manifests/cm.yaml": configMap("from-main", "1")})
	first := repo.Commit("first")
	repo.Tag("v1", first)
	repo.WriteFiles(map[string]string{
		"manifests/cm.yaml":                          configMap("from-main", "2"),
		"deep/nested/bundle/dir/manifests/cm.yaml":   configMap("from-dir", "1"),
		"deep/nested/bundle/dir/manifests/more.json": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"json","namespace":"default"}}`,
	})
	second := repo.Commit("second")
	srv := root.ServeHTTP(testgit.HTTPOptions{})

	gitBundle := func(name string, ref rukpakv1alpha1.GitRef, dir string) {
		t.Helper()
		b := &rukpakv1alpha1.Bundle{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: rukpakv1alpha1.BundleSpec{
				ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
				Source: rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit, Git: &rukpakv1alpha1.GitSource{
					Repository: srv.RepoURL("bundles"), Ref: ref, Directory: dir,
				}},
			},
		}
		if err := h.c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name       string
		ref        rukpakv1alpha1.GitRef
		dir        string
		wantCommit string
	}{
		{"git-branch", rukpakv1alpha1.GitRef{Branch: "main"}, "", second},
		{"git-tag", rukpakv1alpha1.GitRef{Tag: "v1"}, "", first},
		{"git-commit", rukpakv1alpha1.GitRef{Commit: first}, "", first},
		{"git-directory", rukpakv1alpha1.GitRef{Branch: "main"}, "deep/nested/bundle/dir", second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gitBundle(tc.name, tc.ref, tc.dir)
			b := h.waitBundle(tc.name, rukpakv1alpha1.PhaseUnpacked, rukpakv1alpha1.ReasonUnpackSuccessful, "")
			rs := b.Status.ResolvedSource
			if rs == nil || rs.Git == nil || rs.Git.Ref.Commit != tc.wantCommit || rs.Git.Directory != tc.dir {
				t.Errorf("resolvedSource = %+v, want commit %s", rs, tc.wantCommit)
			}
		})
	}
	t.Run("git-missing-tag", func(t *testing.T) {
		gitBundle("git-missing-tag", rukpakv1alpha1.GitRef{Tag: "v9"}, "")
		h.waitBundle("git-missing-tag", rukpakv1alpha1.PhaseFailing, rukpakv1alpha1.ReasonUnpackFailed, "v9")
	})

	t.Run("configmaps unpack once the ConfigMap exists", func(t *testing.T) {
		b := &rukpakv1alpha1.Bundle{
			ObjectMeta: metav1.ObjectMeta{Name: "from-configmaps"},
			Spec: rukpakv1alpha1.BundleSpec{
				ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
				Source: rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps, ConfigMaps: []rukpakv1alpha1.ConfigMapSource{
					{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: "bundle-manifests"}, Path: "manifests"},
				}},
			},
		}
		if err := h.c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		// As RukPak v0.16 reported it: a typo is seen, not pending forever.
		b = h.waitBundle("from-configmaps", rukpakv1alpha1.PhaseFailing, rukpakv1alpha1.ReasonUnpackFailed, "")
		if c, want := conditions.Get(b.Status.Conditions, rukpakv1alpha1.TypeUnpacked), `source bundle content: get configmap `+namespace+`/bundle-manifests: ConfigMap "bundle-manifests" not found`; c.Message != want {
			t.Fatalf("Unpacked message %q, want %q", c.Message, want)
		}
		start := time.Now()
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "bundle-manifests", Namespace: namespace},
			Immutable:  ptr.To(true),
			Data:       map[string]string{"cm.yaml": configMap("from-configmap", "1")},
		}
		if err := h.c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		// The ConfigMap watch brings the Bundle back at once, not at the
		// next periodic retry: TestBundlesUsingConfigMap (provisioner/bundle)
		// proves the mapping; here it unpacks.
		h.waitBundle("from-configmaps", rukpakv1alpha1.PhaseUnpacked, rukpakv1alpha1.ReasonUnpackSuccessful, "")
		t.Logf("unpacked %s after the ConfigMap appeared", time.Since(start).Round(time.Millisecond))
	})

	t.Run("an image no bundle uses any more leaves the cache", func(t *testing.T) {
		src := h.pushBundle("cached", map[string]string{"manifests/cm.yaml": configMap("cached", "1")})
		for _, name := range []string{"cached-a", "cached-b"} {
			b := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Source: src}}
			if err := h.c.Create(ctx, b); err != nil {
				t.Fatal(err)
			}
			h.waitBundle(name, rukpakv1alpha1.PhaseUnpacked, rukpakv1alpha1.ReasonUnpackSuccessful, "")
		}
		cached := func() int {
			// images/<repository key>/sha256/<hex>
			entries, _ := filepath.Glob(filepath.Join(h.unpackDir, "images", "*", "sha256", "*"))
			return len(entries)
		}
		before := cached()
		if before == 0 {
			t.Fatalf("nothing cached under %s", h.unpackDir)
		}
		deleteBundle := func(name string) {
			if err := h.c.Delete(ctx, h.bundle(name)); err != nil {
				t.Fatal(err)
			}
			eventually(t, name+" gone", func() error {
				_, err := h.getBundle(name)
				return err
			})
		}
		deleteBundle("cached-a")
		if got := cached(); got != before {
			t.Errorf("cache shrank to %d entries while cached-b still uses the image", got)
		}
		deleteBundle("cached-b")
		if got := cached(); got != before-1 {
			t.Errorf("cache has %d entries after the last user went, want %d", got, before-1)
		}
	})
}
