package bundledeployment

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// newName stands for the random name a Bundle gets when the name its
// template generates is taken (randomName), in the tests' expectations.
const newName = "NEW"

// randomlyNamed replaces in s the name of a Bundle named randomly for bd
// (not first) with newName, checking its form.
func randomlyNamed(t *testing.T, s, bd, first, got string) string {
	t.Helper()
	if got == "" || got == first || !strings.HasPrefix(got, bd+"-") {
		return s
	}
	suffix := strings.TrimPrefix(got, bd+"-")
	if len(suffix) != hashLength || strings.Trim(suffix, alphabet) != "" {
		t.Errorf("bundle name %q: want %s-<%d characters of %s>", got, bd, hashLength, alphabet)
	}
	return strings.ReplaceAll(s, got, newName)
}

func TestDesiredBundleInstallsOnlyItsOwn(t *testing.T) {
	spec := func(ref string) rukpakv1alpha1.BundleSpec {
		return rukpakv1alpha1.BundleSpec{
			ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
			Source:               rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: ref}},
		}
	}
	bdTemplate := rukpakv1alpha1.BundleTemplate{Spec: spec("registry.test/app:v1")}
	hash, err := TemplateHash(bdTemplate)
	if err != nil {
		t.Fatal(err)
	}
	name := "app-" + hash
	existing := func(uid types.UID, s rukpakv1alpha1.BundleSpec) *rukpakv1alpha1.Bundle {
		return &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid}, Spec: s}
	}
	// controlled is a Bundle with a controller reference to the
	// BundleDeployment, as the provisioner sets (and as anyone can).
	controlled := func(b *rukpakv1alpha1.Bundle) *rukpakv1alpha1.Bundle {
		b.OwnerReferences = []metav1.OwnerReference{{APIVersion: rukpakv1alpha1.GroupVersion.String(), Kind: "BundleDeployment", Name: "app", UID: "bd-uid", Controller: ptr(true)}}
		return b
	}
	// elsewhere is b under another name, labelled with template hash h.
	elsewhere := func(b *rukpakv1alpha1.Bundle, other, h string) *rukpakv1alpha1.Bundle {
		b.Name = other
		b.Labels = map[string]string{rukpakv1alpha1.LabelBundleTemplateHash: h}
		return b
	}
	changed := fmt.Sprintf("bundle %q no longer matches the template (its spec was changed): refusing to install it; delete it to let the bundle deployment create it again", name)

	cases := []struct {
		name     string
		bundle   *rukpakv1alpha1.Bundle
		records  []rukpakv1alpha1.GeneratedBundle
		cacheLag bool // the cache does not show the Bundle yet
		// active is status.activeBundle.
		active string
		// want: the refusal message, or "" for the Bundle being used.
		want string
		// wantName: the Bundle used ("" for name; newName for a new one
		// under a random name).
		wantName    string
		wantRecords string
	}{
		{name: "none yet: created and recorded", wantRecords: "[{" + name + " created-uid}]"},
		{name: "its own", bundle: existing("mine", spec("registry.test/app:v1")),
			records: []rukpakv1alpha1.GeneratedBundle{{Name: name, UID: "mine"}}, wantRecords: "[{" + name + " mine}]"},
		{name: "its own, spec changed since", bundle: existing("mine", spec("registry.test/evil:v1")),
			records: []rukpakv1alpha1.GeneratedBundle{{Name: name, UID: "mine"}}, want: changed, wantRecords: "[{" + name + " mine}]"},
		{name: "someone else's, other spec: another name", bundle: existing("theirs", spec("registry.test/evil:v1")),
			wantName: newName, wantRecords: "[{NEW created-uid}]"},
		{name: "someone else's, same spec: another name", bundle: existing("theirs", spec("registry.test/app:v1")),
			wantName: newName, wantRecords: "[{NEW created-uid}]"},
		{name: "recreated by someone else under a recorded name: another name", bundle: existing("theirs", spec("registry.test/app:v1")),
			records: []rukpakv1alpha1.GeneratedBundle{{Name: name, UID: "mine"}}, wantName: newName, wantRecords: "[{" + name + " mine} {NEW created-uid}]"},
		{name: "intent only (provisioner stopped after creating): adopted if the spec is the template's", bundle: existing("mine", spec("registry.test/app:v1")),
			records: []rukpakv1alpha1.GeneratedBundle{{Name: name}}, wantRecords: "[{" + name + " mine}]"},
		{name: "intent only, other spec: another name", bundle: existing("theirs", spec("registry.test/evil:v1")),
			records: []rukpakv1alpha1.GeneratedBundle{{Name: name}}, wantName: newName, wantRecords: "[{" + name + " } {NEW created-uid}]"},
		{name: "installed before records existed: the active bundle is adopted", bundle: controlled(existing("mine", spec("registry.test/app:v1"))),
			active: name, wantRecords: "[{" + name + " mine}]"},
		{name: "installed before records existed: a rollout in flight with the template's spec is adopted", bundle: controlled(existing("mine", spec("registry.test/app:v1"))),
			active: "app-older", wantRecords: "[{" + name + " mine}]"},
		{name: "installed before records existed: another bundle is not", bundle: controlled(existing("theirs", spec("registry.test/evil:v1"))),
			active: "app-older", wantName: newName, wantRecords: "[{NEW created-uid}]"},
		{name: "not installed yet, no records: a controller reference proves nothing", bundle: controlled(existing("theirs", spec("registry.test/app:v1"))),
			wantName: newName, wantRecords: "[{NEW created-uid}]"},
		{name: "created by someone else after the cache was read: another name", bundle: existing("theirs", spec("registry.test/app:v1")), cacheLag: true,
			wantName: newName, wantRecords: "[{NEW created-uid}]"},
		{name: "its own under a random name, the first name free again", bundle: elsewhere(existing("mine", spec("registry.test/app:v1")), "app-b2c4d5", hash),
			records: []rukpakv1alpha1.GeneratedBundle{{Name: "app-b2c4d5", UID: "mine"}}, wantName: "app-b2c4d5", wantRecords: "[{app-b2c4d5 mine}]"},
		{name: "its own under a random name, spec changed since", bundle: elsewhere(existing("mine", spec("registry.test/evil:v1")), "app-b2c4d5", hash),
			records:     []rukpakv1alpha1.GeneratedBundle{{Name: "app-b2c4d5", UID: "mine"}},
			want:        `bundle "app-b2c4d5" no longer matches the template (its spec was changed): refusing to install it; delete it to let the bundle deployment create it again`,
			wantRecords: "[{app-b2c4d5 mine}]"},
		{name: "an intent under a random name (provisioner stopped after creating): adopted", bundle: controlled(elsewhere(existing("mine", spec("registry.test/app:v1")), "app-b2c4d5", hash)),
			records: []rukpakv1alpha1.GeneratedBundle{{Name: "app-b2c4d5"}}, wantName: "app-b2c4d5", wantRecords: "[{app-b2c4d5 mine}]"},
		{name: "an intent under a random name, not controlled by it: not adopted", bundle: elsewhere(existing("theirs", spec("registry.test/app:v1")), "app-b2c4d5", hash),
			records: []rukpakv1alpha1.GeneratedBundle{{Name: "app-b2c4d5"}}, wantRecords: "[{app-b2c4d5 } {" + name + " created-uid}]"},
		{name: "its own under a random name, for another template", bundle: elsewhere(existing("mine", spec("registry.test/app:v0")), "app-b2c4d5", "other"),
			records: []rukpakv1alpha1.GeneratedBundle{{Name: "app-b2c4d5", UID: "mine"}}, wantRecords: "[{app-b2c4d5 mine} {" + name + " created-uid}]"},
		{name: "its own under the first name of this template, for another template: another name", bundle: elsewhere(existing("mine", spec("registry.test/app:v0")), name, "other"),
			records: []rukpakv1alpha1.GeneratedBundle{{Name: name, UID: "mine"}}, wantName: newName, wantRecords: "[{" + name + " mine} {NEW created-uid}]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			if err := rukpakv1alpha1.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			bd := &rukpakv1alpha1.BundleDeployment{
				ObjectMeta: metav1.ObjectMeta{Name: "app", UID: "bd-uid"},
				Spec:       rukpakv1alpha1.BundleDeploymentSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Template: bdTemplate},
				Status:     rukpakv1alpha1.BundleDeploymentStatus{GeneratedBundles: tc.records, ActiveBundle: tc.active},
			}
			builder := fake.NewClientBuilder().WithScheme(scheme).WithIndex(&rukpakv1alpha1.Bundle{}, bundleOwnerIndex, bundleOwner)
			if tc.bundle != nil {
				builder = builder.WithObjects(tc.bundle)
			}
			flushed := []string{}
			lagged := false
			c := builder.WithInterceptorFuncs(interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if tc.cacheLag && !lagged {
						lagged = true
						return apierrors.NewNotFound(rukpakv1alpha1.GroupVersion.WithResource("bundles").GroupResource(), key.Name)
					}
					return c.Get(ctx, key, obj, opts...)
				},
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					// The intent must be stored before the create request.
					if len(flushed) == 0 || !strings.Contains(flushed[len(flushed)-1], "{"+obj.GetName()+" }") {
						return fmt.Errorf("creating %s with flushed records %s", obj.GetName(), flushed)
					}
					obj.SetUID("created-uid")
					return c.Create(ctx, obj, opts...)
				},
			}).Build()
			r := &Reconciler{Client: c}
			r.records.load(bd)
			flush := func() error {
				flushed = append(flushed, fmt.Sprint(bd.Status.GeneratedBundles))
				return nil
			}

			b, err := r.desiredBundle(context.Background(), bd, flush)
			var refused *refusedError
			got := ""
			if b != nil {
				got = b.Name
			}
			wantName := tc.wantName
			if wantName == "" {
				wantName = name
			}
			// Only a new Bundle is named randomly.
			randomlyNamed := func(t *testing.T, s, bd, first, got string) string {
				if wantName != newName {
					return s
				}
				return randomlyNamed(t, s, bd, first, got)
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "" && randomlyNamed(t, got, "app", name, got) != wantName:
				t.Errorf("bundle %q, want %q", got, wantName)
			case tc.want != "" && !errors.As(err, &refused):
				t.Fatalf("got %v, want a refusal", err)
			case tc.want != "" && refused.msg != tc.want:
				t.Errorf("refusal %q\nwant %q", refused.msg, tc.want)
			}
			if got := randomlyNamed(t, fmt.Sprint(bd.Status.GeneratedBundles), "app", name, got); got != tc.wantRecords {
				t.Errorf("records %s, want %s", got, tc.wantRecords)
			}
			if tc.bundle != nil {
				got := &rukpakv1alpha1.Bundle{}
				if err := c.Get(context.Background(), client.ObjectKey{Name: tc.bundle.Name}, got); err != nil || got.UID != tc.bundle.UID {
					t.Errorf("the existing bundle was replaced or deleted: %v %v", got.UID, err)
				}
			}
		})
	}
}

// TestRandomName: names no one can compute ahead, of the generated names'
// form and length.
func TestRandomName(t *testing.T) {
	bd := strings.Repeat("b", 45) // the longest BundleDeployment name
	seen := map[string]bool{}
	for range 1000 {
		name, err := randomName(bd)
		if err != nil {
			t.Fatal(err)
		}
		if len(name) > 52 || randomlyNamed(t, name, bd, "", name) != newName {
			t.Fatalf("name %q", name)
		}
		seen[name] = true
	}
	if len(seen) < 999 {
		t.Errorf("%d distinct names of 1000", len(seen))
	}
}
