package catalog

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

func TestPolling(t *testing.T) {
	image := func(ref string) rukpakv1alpha1.BundleSource {
		return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: ref}}
	}
	git := func(ref rukpakv1alpha1.GitRef) rukpakv1alpha1.BundleSource {
		return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit, Git: &rukpakv1alpha1.GitSource{Repository: "https://example.com/c.git", Ref: ref}}
	}
	cms := func(digests ...string) rukpakv1alpha1.BundleSource {
		src := rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps}
		for _, d := range digests {
			src.ConfigMaps = append(src.ConfigMaps, rukpakv1alpha1.ConfigMapSource{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: "c"}, Digest: d})
		}
		return src
	}
	const digest = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
	hourAgo := metav1.NewTime(time.Now().Add(-time.Hour))
	justNow := metav1.Now()
	for _, tc := range []struct {
		name    string
		src     rukpakv1alpha1.BundleSource
		last    *metav1.Time
		movable bool
		due     bool
	}{
		{"image by tag, polled an hour ago", image("example.com/c:latest"), &hourAgo, true, true},
		{"image by tag, just unpacked", image("example.com/c:latest"), &justNow, true, false},
		{"image by tag, never unpacked", image("example.com/c:latest"), nil, true, true},
		{"image by digest never moves", image("example.com/c@" + digest), &hourAgo, false, false},
		{"git branch", git(rukpakv1alpha1.GitRef{Branch: "main"}), &hourAgo, true, true},
		{"git tag", git(rukpakv1alpha1.GitRef{Tag: "v1"}), &hourAgo, true, true},
		{"git commit never moves", git(rukpakv1alpha1.GitRef{Commit: "abcdef0"}), &hourAgo, false, false},
		{"http", rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeHTTP, HTTP: &rukpakv1alpha1.HTTPSource{URL: "https://example.com/c.tgz"}}, &hourAgo, true, true},
		{"ConfigMaps without a digest", cms("", digest), &hourAgo, true, true},
		{"ConfigMaps all pinned", cms(digest, digest), &hourAgo, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := movable(tc.src); got != tc.movable {
				t.Fatalf("movable = %v, want %v", got, tc.movable)
			}
			c := &rukpakv1alpha1.Catalog{Spec: rukpakv1alpha1.CatalogSpec{Source: tc.src, PollInterval: &metav1.Duration{Duration: 10 * time.Minute}}, Status: rukpakv1alpha1.CatalogStatus{LastUnpacked: tc.last}}
			if got := pollDue(c); got != tc.due {
				t.Fatalf("pollDue = %v, want %v", got, tc.due)
			}
			c.Spec.PollInterval = nil
			if pollDue(c) {
				t.Fatal("pollDue without pollInterval")
			}
		})
	}
}
