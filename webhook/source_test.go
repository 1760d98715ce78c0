package webhook

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// TestSourcePaths covers the path rules without an API server; ConfigMap
// lookups are exercised against a real one in TestAdmission.
func TestSourcePaths(t *testing.T) {
	git := func(dir string) rukpakv1alpha1.BundleSource {
		return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit, Git: &rukpakv1alpha1.GitSource{Directory: dir}}
	}
	cm := func(path string) rukpakv1alpha1.BundleSource {
		return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps, ConfigMaps: []rukpakv1alpha1.ConfigMapSource{{Path: path}}}
	}
	cases := []struct {
		name string
		src  rukpakv1alpha1.BundleSource
		want string // "" when valid
	}{
		{"git root", git(""), ""},
		{"git dot", git("."), ""},
		{"git nested", git("a/b/../c"), ""},
		{"git dot-dot", git(".."), "spec.source.git.directory"},
		{"git escaping after clean", git("a/../../b"), "spec.source.git.directory"},
		{"git absolute", git("/a"), "spec.source.git.directory"},
		{"git backslash escape", git(`..\x`), "spec.source.git.directory"},
		{"configMaps root", cm(""), ""},
		{"configMaps nested", cm("manifests/x"), ""},
		{"configMaps escaping", cm("../x"), "spec.source.configMaps[0].path"},
		{"configMaps absolute", cm("/x"), "spec.source.configMaps[0].path"},
		{"image", rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: "x"}}, ""},
		{"upload", rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeUpload, Upload: &rukpakv1alpha1.UploadSource{}}, ""},
		{"upload without member", rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeUpload}, `spec.source.upload: Invalid value: null: bundle.spec.source.upload must be set for source type "upload"`},
	}
	v := &SourceValidator{Namespace: "rukpak-system"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := v.Validate(context.Background(), field.NewPath("spec", "source"), tc.src)
			if tc.want == "" {
				if len(errs) != 0 {
					t.Fatalf("want valid, got %v", errs.ToAggregate())
				}
				return
			}
			if len(errs) != 1 || (!strings.HasPrefix(errs[0].Error(), tc.want+": Invalid value") && errs[0].Error() != tc.want) {
				t.Fatalf("got %v, want one error on %s", errs.ToAggregate(), tc.want)
			}
		})
	}
}

func TestSpecImmutable(t *testing.T) {
	base := rukpakv1alpha1.Bundle{Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: "p", Source: rukpakv1alpha1.BundleSource{
		Type: rukpakv1alpha1.SourceTypeConfigMaps, ConfigMaps: []rukpakv1alpha1.ConfigMapSource{}}}}
	cases := []struct {
		name   string
		mutate func(*rukpakv1alpha1.Bundle)
		denied bool
	}{
		{"labels", func(b *rukpakv1alpha1.Bundle) { b.Labels = map[string]string{"a": "b"} }, false},
		{"status", func(b *rukpakv1alpha1.Bundle) { b.Status.Phase = "Unpacked" }, false},
		{"nil versus empty list is no change", func(b *rukpakv1alpha1.Bundle) { b.Spec.Source.ConfigMaps = nil }, false},
		{"class", func(b *rukpakv1alpha1.Bundle) { b.Spec.ProvisionerClassName = "q" }, true},
		{"configMap added", func(b *rukpakv1alpha1.Bundle) {
			b.Spec.Source.ConfigMaps = []rukpakv1alpha1.ConfigMapSource{{Path: "x"}}
		}, true},
	}
	v := &BundleValidator{Sources: &SourceValidator{}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			newB := base.DeepCopy()
			tc.mutate(newB)
			_, err := v.ValidateUpdate(context.Background(), base.DeepCopy(), newB)
			if (err != nil) != tc.denied {
				t.Fatalf("denied = %v (%v), want %v", err != nil, err, tc.denied)
			}
		})
	}
}

// A Reviewer that records what it is asked and answers from allowed.
type fakeReviewer struct {
	allowed map[string]bool // "resource/name"
	asked   []authorizationv1.SubjectAccessReviewSpec
}

func (f *fakeReviewer) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	sar := obj.(*authorizationv1.SubjectAccessReview)
	f.asked = append(f.asked, sar.Spec)
	ra := sar.Spec.ResourceAttributes
	sar.Status.Allowed = f.allowed[ra.Resource+"/"+ra.Name]
	return nil
}

func TestAccessReviews(t *testing.T) {
	user := authenticationv1.UserInfo{Username: "alice", UID: "u-1", Groups: []string{"team-a", "system:authenticated"},
		Extra: map[string]authenticationv1.ExtraValue{"scopes": {"s1"}}}
	ctx := admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UserInfo: user}})
	src := rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps, ConfigMaps: []rukpakv1alpha1.ConfigMapSource{
		{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: "ok"}},
		{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: "no"}},
		{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: "no"}},
	}}
	r := &fakeReviewer{allowed: map[string]bool{"configmaps/ok": true}}
	v := &SourceValidator{Reviewer: r, Namespace: "rukpak-system"}
	errs := v.Validate(ctx, field.NewPath("spec", "source"), src)
	want := []string{
		`spec.source.configMaps[1].configMap.name: Forbidden: user "alice" may not get ConfigMap rukpak-system/no`,
		`spec.source.configMaps[2].configMap.name: Forbidden: user "alice" may not get ConfigMap rukpak-system/no`,
	}
	if len(errs) != len(want) || errs[0].Error() != want[0] || errs[1].Error() != want[1] {
		t.Fatalf("errors = %v, want %q", errs, want)
	}
	// One review per distinct object, each with the whole user info.
	if len(r.asked) != 2 {
		t.Fatalf("asked %d reviews, want 2: %+v", len(r.asked), r.asked)
	}
	for _, s := range r.asked {
		ra := s.ResourceAttributes
		if s.User != "alice" || s.UID != "u-1" || len(s.Groups) != 2 || s.Extra["scopes"][0] != "s1" ||
			ra.Verb != "get" || ra.Namespace != "rukpak-system" || ra.Resource != "configmaps" || ra.Group != "" {
			t.Fatalf("review spec = %+v", s)
		}
	}

	// Without the admission request there is no user to ask about: the
	// webhook errs (the API server retries) rather than admits.
	errs = v.Validate(context.Background(), field.NewPath("spec", "source"), src)
	if len(errs) != 1 || errs[0].Type != field.ErrorTypeInternal {
		t.Fatalf("without a request: %v, want one internal error", errs)
	}
}

func TestDenialStatus(t *testing.T) {
	gk := rukpakv1alpha1.GroupVersion.WithKind("Bundle").GroupKind()
	err := invalid(gk, "b", field.ErrorList{
		field.Invalid(field.NewPath("spec", "source", "git", "directory"), "..", "must be a relative path inside the repository"),
		field.Forbidden(field.NewPath("spec", "source", "git", "auth", "secret", "name"), `user "bob" may not get Secret ns/s`),
	})
	if !apierrors.IsForbidden(err) || err.Error() != `spec.source.git.auth.secret.name: user "bob" may not get Secret ns/s` {
		t.Fatalf("got %v (reason %s), want the Forbidden field message only", err, apierrors.ReasonForError(err))
	}
}

// TestRukPakWords: where RukPak v0.16's webhook refused the same source,
// the denial is its message word for word (the status reason, as kubectl
// shows it), RukPak's first and this project's own problems after them.
func TestRukPakWords(t *testing.T) {
	git := func(dir string) rukpakv1alpha1.BundleSource {
		return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit, Git: &rukpakv1alpha1.GitSource{Directory: dir}}
	}
	cms := func(paths ...string) rukpakv1alpha1.BundleSource {
		src := rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps}
		for _, p := range paths {
			src.ConfigMaps = append(src.ConfigMaps, rukpakv1alpha1.ConfigMapSource{Path: p})
		}
		return src
	}
	cases := []struct {
		name string
		src  rukpakv1alpha1.BundleSource
		want string // the denial's reason; "" for this project's own Invalid status
	}{
		{"git directory", git("../x"), `bundle.spec.source.git.directory begins with "../": directory must define path within the repository`},
		{"git directory escaping after clean", git("a/../../x"), `bundle.spec.source.git.directory begins with "../": directory must define path within the repository`},
		{"git directory dot-dot alone (RukPak admitted it)", git(".."), ""},
		{"git directory absolute (RukPak admitted it)", git("/x"), ""},
		{"configMaps path", cms("../x"), `bundle.spec.source.configmaps[0].path is invalid: "../x" is outside bundle root`},
		{"two configMaps paths", cms("ok", "../x", "../../y"),
			`[bundle.spec.source.configmaps[1].path is invalid: "../x" is outside bundle root, bundle.spec.source.configmaps[2].path is invalid: "../../y" is outside bundle root]`},
		{"RukPak's refusal, then this project's", cms("/abs", "../x"),
			`[bundle.spec.source.configmaps[1].path is invalid: "../x" is outside bundle root, spec.source.configMaps[0].path: Invalid value: "/abs": must be a relative path inside the bundle root]`},
		{"image type without image", rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Git: &rukpakv1alpha1.GitSource{}},
			`bundle.spec.source.image must be set for source type "image"`},
		{"git type without git", rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit},
			`bundle.spec.source.git must be set for source type "git"`},
		{"configMaps type without configMaps", rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps},
			`bundle.spec.source.configmaps must be set for source type "configmaps"`},
		{"http type without http", rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeHTTP},
			`bundle.spec.source.http must be set for source type "http"`},
	}
	gk := rukpakv1alpha1.GroupVersion.WithKind("Bundle").GroupKind()
	v := &SourceValidator{Namespace: "rukpak-system"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := invalid(gk, "b", v.Validate(context.Background(), field.NewPath("spec", "source"), tc.src))
			if err == nil {
				t.Fatal("admitted")
			}
			if tc.want == "" {
				if !apierrors.IsInvalid(err) {
					t.Fatalf("got %v (reason %q), want this project's Invalid status", err, apierrors.ReasonForError(err))
				}
				return
			}
			var status apierrors.APIStatus
			if !errors.As(err, &status) {
				t.Fatalf("got %T", err)
			}
			s := status.Status()
			if string(s.Reason) != tc.want || s.Message != "" || s.Code != http.StatusForbidden {
				t.Fatalf("got code %d reason %q message %q\nwant code 403 reason %q and no message", s.Code, s.Reason, s.Message, tc.want)
			}
		})
	}
}
