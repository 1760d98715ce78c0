package unpack

import (
	"strings"
	"testing"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

const (
	digestA = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	digestB = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	commitA = "0123456789abcdef0123456789abcdef01234567"
)

func imageSrc(ref string) *rukpakv1alpha1.BundleSource {
	return &rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: ref, ImagePullSecretName: "pull"}}
}

func gitSrc(repo string, ref rukpakv1alpha1.GitRef) *rukpakv1alpha1.BundleSource {
	return &rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit, Git: &rukpakv1alpha1.GitSource{
		Repository: repo, Directory: "manifests", Ref: ref,
		Auth: &rukpakv1alpha1.Authorization{Secret: &rukpakv1alpha1.LocalObjectReference{Name: "creds"}},
	}}
}

func cmSrc(names ...string) *rukpakv1alpha1.BundleSource {
	s := &rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps}
	for _, n := range names {
		s.ConfigMaps = append(s.ConfigMaps, rukpakv1alpha1.ConfigMapSource{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: n}, Path: "manifests"})
	}
	return s
}

func httpSrc(url string) *rukpakv1alpha1.BundleSource {
	return &rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeHTTP, HTTP: &rukpakv1alpha1.HTTPSource{URL: url}}
}

func uploadSrc(digest string) *rukpakv1alpha1.BundleSource {
	return &rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeUpload, Upload: &rukpakv1alpha1.UploadSource{Digest: digest}}
}

func TestMatchesSpec(t *testing.T) {
	tagged := imageSrc("registry.example.com/team/bundle:v1")
	pinnedSpec := imageSrc("registry.example.com/team/bundle@" + digestA)
	otherSecret := imageSrc("registry.example.com/team/bundle@" + digestA)
	otherSecret.Image.ImagePullSecretName = "someone-elses"
	insecure := imageSrc("registry.example.com/team/bundle@" + digestA)
	insecure.Image.InsecureSkipTLSVerify = true
	branch := gitSrc("https://git.example.com/team/repo", rukpakv1alpha1.GitRef{Branch: "main"})
	noAuth := gitSrc("https://git.example.com/team/repo", rukpakv1alpha1.GitRef{Commit: commitA})
	noAuth.Git.Auth = nil
	otherDir := gitSrc("https://git.example.com/team/repo", rukpakv1alpha1.GitRef{Commit: commitA})
	otherDir.Git.Directory = "."

	tests := []struct {
		name           string
		spec, resolved *rukpakv1alpha1.BundleSource
		wantErr        string // "" = matches
	}{
		{name: "image tag pinned by digest", spec: tagged, resolved: imageSrc("registry.example.com/team/bundle@" + digestA)},
		{name: "image docker hub normalised", spec: imageSrc("busybox:1"), resolved: imageSrc("index.docker.io/library/busybox@" + digestA)},
		{name: "image digest spec, same digest", spec: pinnedSpec, resolved: imageSrc("registry.example.com/team/bundle@" + digestA)},
		{name: "image digest spec, other digest", spec: pinnedSpec, resolved: imageSrc("registry.example.com/team/bundle@" + digestB), wantErr: "resolved digest " + digestB + " differs from the spec's " + digestA},
		{name: "image other repository", spec: tagged, resolved: imageSrc("evil.example.com/team/bundle@" + digestA), wantErr: `resolved image repository "evil.example.com/team/bundle" differs from the spec's "registry.example.com/team/bundle"`},
		{name: "image other path same host", spec: tagged, resolved: imageSrc("registry.example.com/other/bundle@" + digestA), wantErr: "differs from the spec's"},
		{name: "image resolved by tag", spec: tagged, resolved: imageSrc("registry.example.com/team/bundle:v2"), wantErr: "resolved image reference is not by digest"},
		{name: "image other pull secret", spec: pinnedSpec, resolved: otherSecret, wantErr: "image pull secret or TLS options differ from the spec"},
		{name: "image TLS relaxed", spec: pinnedSpec, resolved: insecure, wantErr: "image pull secret or TLS options differ from the spec"},
		{name: "image missing", spec: tagged, resolved: &rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage}, wantErr: "image source missing"},
		{name: "type differs", spec: tagged, resolved: branch, wantErr: `type "git" differs from the spec's "image"`},

		{name: "git branch pinned to commit", spec: branch, resolved: gitSrc("https://git.example.com/team/repo", rukpakv1alpha1.GitRef{Commit: commitA})},
		{name: "git commit spec, extended", spec: gitSrc("https://git.example.com/team/repo", rukpakv1alpha1.GitRef{Commit: commitA[:7]}), resolved: gitSrc("https://git.example.com/team/repo", rukpakv1alpha1.GitRef{Commit: commitA})},
		{name: "git commit spec, other commit", spec: gitSrc("https://git.example.com/team/repo", rukpakv1alpha1.GitRef{Commit: "fedcba9"}), resolved: gitSrc("https://git.example.com/team/repo", rukpakv1alpha1.GitRef{Commit: commitA}), wantErr: "resolved commit " + commitA + " does not extend the spec's fedcba9"},
		{name: "git other repository", spec: branch, resolved: gitSrc("https://evil.example.com/repo", rukpakv1alpha1.GitRef{Commit: commitA}), wantErr: "git repository, directory or auth differs from the spec"},
		{name: "git other auth", spec: branch, resolved: noAuth, wantErr: "git repository, directory or auth differs from the spec"},
		{name: "git other directory", spec: branch, resolved: otherDir, wantErr: "git repository, directory or auth differs from the spec"},
		{name: "git resolved to a branch", spec: branch, resolved: gitSrc("https://git.example.com/team/repo", rukpakv1alpha1.GitRef{Branch: "evil"}), wantErr: "resolved git ref is not exactly one full commit hash"},
		{name: "git abbreviated commit", spec: branch, resolved: gitSrc("https://git.example.com/team/repo", rukpakv1alpha1.GitRef{Commit: commitA[:12]}), wantErr: "not exactly one full commit hash"},
		{name: "git commit plus tag", spec: branch, resolved: gitSrc("https://git.example.com/team/repo", rukpakv1alpha1.GitRef{Commit: commitA, Tag: "v1"}), wantErr: "not exactly one full commit hash"},
		{name: "git missing", spec: branch, resolved: &rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit}, wantErr: "git source missing"},

		{name: "configMaps same", spec: cmSrc("a", "b"), resolved: cmSrc("a", "b")},
		{name: "configMaps other name", spec: cmSrc("a", "b"), resolved: cmSrc("a", "secret-stuff"), wantErr: "configMaps[1] differs from the spec"},
		{name: "configMaps extra", spec: cmSrc("a"), resolved: cmSrc("a", "b"), wantErr: "resolved source lists 2 ConfigMaps, the spec 1"},

		{name: "http same", spec: httpSrc("https://files.example.com/b.tgz"), resolved: httpSrc("https://files.example.com/b.tgz")},
		{name: "http other url", spec: httpSrc("https://files.example.com/b.tgz"), resolved: httpSrc("https://evil.example.com/b.tgz"), wantErr: "http url or auth differs from the spec"},

		{name: "upload unpinned", spec: uploadSrc(""), resolved: uploadSrc(digestA)},
		{name: "upload pinned, same", spec: uploadSrc(digestA), resolved: uploadSrc(digestA)},
		{name: "upload pinned, other", spec: uploadSrc(digestA), resolved: uploadSrc(digestB), wantErr: "resolved digest " + digestB + " differs from the spec's " + digestA},
		{name: "upload resolved without digest", spec: uploadSrc(""), resolved: uploadSrc(""), wantErr: "upload source or its resolved digest missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := MatchesSpec(tt.spec, tt.resolved)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("got %v, want a match", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestFetchSource(t *testing.T) {
	bundle := func(spec, resolved *rukpakv1alpha1.BundleSource) *rukpakv1alpha1.Bundle {
		b := &rukpakv1alpha1.Bundle{}
		b.Spec.Source = *spec
		b.Status.ResolvedSource = resolved
		return b
	}
	branch := gitSrc("https://git.example.com/team/repo", rukpakv1alpha1.GitRef{Branch: "main"})

	t.Run("git pin taken, everything else from the spec", func(t *testing.T) {
		got := FetchSource(bundle(branch, gitSrc("https://git.example.com/team/repo", rukpakv1alpha1.GitRef{Commit: commitA})))
		if got.Git.Repository != branch.Git.Repository || got.Git.Ref != (rukpakv1alpha1.GitRef{Commit: commitA}) || got.Git.Auth.SecretName() != "creds" {
			t.Fatalf("got %+v", got.Git)
		}
		if branch.Git.Ref.Branch != "main" {
			t.Fatal("FetchSource modified the spec")
		}
	})
	t.Run("status-only repository ignored", func(t *testing.T) {
		got := FetchSource(bundle(branch, gitSrc("https://evil.example.com/repo", rukpakv1alpha1.GitRef{Commit: commitA})))
		if got.Git.Repository != "https://git.example.com/team/repo" || got.Git.Ref.Branch != "main" {
			t.Fatalf("got %+v, want the spec", got.Git)
		}
	})
	t.Run("image pin taken", func(t *testing.T) {
		got := FetchSource(bundle(imageSrc("registry.example.com/team/bundle:v1"), imageSrc("registry.example.com/team/bundle@"+digestA)))
		if got.Image.Ref != "registry.example.com/team/bundle@"+digestA || got.Image.ImagePullSecretName != "pull" {
			t.Fatalf("got %+v", got.Image)
		}
	})
	t.Run("image from another registry ignored", func(t *testing.T) {
		got := FetchSource(bundle(imageSrc("registry.example.com/team/bundle:v1"), imageSrc("evil.example.com/x@"+digestA)))
		if got.Image.Ref != "registry.example.com/team/bundle:v1" {
			t.Fatalf("got %+v, want the spec", got.Image)
		}
	})
	t.Run("no resolved source", func(t *testing.T) {
		b := bundle(branch, nil)
		if got := FetchSource(b); got != &b.Spec.Source {
			t.Fatalf("got %+v, want the spec", got)
		}
	})
}
