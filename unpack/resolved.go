package unpack

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/api/equality"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// FetchSource returns the source an Unpacker fetches for bundle: its
// status.resolvedSource when that is the spec plus only a pin (see
// MatchesSpec), else the spec.
//
// Status is writable by anyone with bundles/status, a right that must not
// choose where credentials are sent or which repository is fetched: a
// resolved source is used only for the pin it adds (an image digest, a git
// commit), and image and git sources are rebuilt from the spec with that pin,
// so nothing else in status ever reaches a fetch.
func FetchSource(bundle *rukpakv1alpha1.Bundle) *rukpakv1alpha1.BundleSource {
	spec := &bundle.Spec.Source
	rs := bundle.Status.ResolvedSource
	if rs == nil || MatchesSpec(spec, rs) != nil {
		return spec
	}
	out := spec.DeepCopy()
	switch spec.Type {
	case rukpakv1alpha1.SourceTypeImage:
		out.Image.Ref = rs.Image.Ref
	case rukpakv1alpha1.SourceTypeGit:
		out.Git.Ref = rukpakv1alpha1.GitRef{Commit: rs.Git.Ref.Commit}
	default:
		// configMaps and http carry no location beyond what MatchesSpec
		// compared; whatever else the resolved source records (content
		// identities) is a pin for the unpacker to check.
		out = rs.DeepCopy()
	}
	return out
}

// MatchesSpec returns nil when resolved is spec with only a pin added, else
// why not:
//   - image: same repository, pull secret and TLS options; the reference is
//     that repository by digest, and the spec's digest if the spec has one;
//   - git: same repository, directory and auth; the ref is a full commit,
//     extending the spec's commit if the spec names one;
//   - configMaps: the same ConfigMaps at the same paths, in order;
//   - http: the same URL and auth;
//   - upload: a digest, the spec's if the spec pins one.
func MatchesSpec(spec, resolved *rukpakv1alpha1.BundleSource) error {
	if spec == nil || resolved == nil {
		return errors.New("no source")
	}
	if spec.Type != resolved.Type {
		return fmt.Errorf("type %q differs from the spec's %q", resolved.Type, spec.Type)
	}
	switch spec.Type {
	case rukpakv1alpha1.SourceTypeImage:
		return imageMatches(spec.Image, resolved.Image)
	case rukpakv1alpha1.SourceTypeGit:
		return gitMatches(spec.Git, resolved.Git)
	case rukpakv1alpha1.SourceTypeConfigMaps:
		return configMapsMatch(spec.ConfigMaps, resolved.ConfigMaps)
	case rukpakv1alpha1.SourceTypeHTTP:
		if spec.HTTP == nil || resolved.HTTP == nil {
			return errors.New("http source missing")
		}
		if spec.HTTP.URL != resolved.HTTP.URL || !equality.Semantic.DeepEqual(spec.HTTP.Auth, resolved.HTTP.Auth) {
			return errors.New("http url or auth differs from the spec")
		}
		return nil
	case rukpakv1alpha1.SourceTypeUpload:
		if spec.Upload == nil || resolved.Upload == nil || resolved.Upload.Digest == "" {
			return errors.New("upload source or its resolved digest missing")
		}
		if spec.Upload.Digest != "" && spec.Upload.Digest != resolved.Upload.Digest {
			return fmt.Errorf("resolved digest %s differs from the spec's %s", resolved.Upload.Digest, spec.Upload.Digest)
		}
		return nil
	}
	return fmt.Errorf("unknown source type %q", spec.Type)
}

func imageMatches(spec, resolved *rukpakv1alpha1.ImageSource) error {
	if spec == nil || resolved == nil {
		return errors.New("image source missing")
	}
	if spec.ImagePullSecretName != resolved.ImagePullSecretName || spec.InsecureSkipTLSVerify != resolved.InsecureSkipTLSVerify || spec.CertificateData != resolved.CertificateData {
		return errors.New("image pull secret or TLS options differ from the spec")
	}
	specRef, err := name.ParseReference(spec.Ref)
	if err != nil {
		return fmt.Errorf("spec image reference: %w", err)
	}
	pinned, err := name.NewDigest(resolved.Ref)
	if err != nil {
		return fmt.Errorf("resolved image reference is not by digest: %w", err)
	}
	if pinned.Context().Name() != specRef.Context().Name() {
		return fmt.Errorf("resolved image repository %q differs from the spec's %q", pinned.Context().Name(), specRef.Context().Name())
	}
	if d, ok := specRef.(name.Digest); ok && d.DigestStr() != pinned.DigestStr() {
		return fmt.Errorf("resolved digest %s differs from the spec's %s", pinned.DigestStr(), d.DigestStr())
	}
	return nil
}

func gitMatches(spec, resolved *rukpakv1alpha1.GitSource) error {
	if spec == nil || resolved == nil {
		return errors.New("git source missing")
	}
	if spec.Repository != resolved.Repository || spec.Directory != resolved.Directory || !equality.Semantic.DeepEqual(spec.Auth, resolved.Auth) {
		return errors.New("git repository, directory or auth differs from the spec")
	}
	commit := resolved.Ref.Commit
	if resolved.Ref.Branch != "" || resolved.Ref.Tag != "" || !fullCommit(commit) {
		return errors.New("resolved git ref is not exactly one full commit hash")
	}
	if spec.Ref.Commit != "" && !strings.HasPrefix(commit, spec.Ref.Commit) {
		return fmt.Errorf("resolved commit %s does not extend the spec's %s", commit, spec.Ref.Commit)
	}
	return nil
}

// fullCommit is a SHA-1 or SHA-256 object name in lower-case hex.
func fullCommit(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func configMapsMatch(spec, resolved []rukpakv1alpha1.ConfigMapSource) error {
	if len(spec) != len(resolved) {
		return fmt.Errorf("resolved source lists %d ConfigMaps, the spec %d", len(resolved), len(spec))
	}
	for i := range spec {
		if spec[i].ConfigMap.Name != resolved[i].ConfigMap.Name || spec[i].Path != resolved[i].Path {
			return fmt.Errorf("configMaps[%d] differs from the spec", i)
		}
	}
	return nil
}
