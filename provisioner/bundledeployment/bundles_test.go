package bundledeployment

import (
	"context"
	"errors"
	"fmt"
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
	differs := fmt.Sprintf("bundle %q was not created by this bundle deployment and its spec differs from the template: refusing to install it; delete it to let the bundle deployment create its own", name)
	same := fmt.Sprintf("bundle %q was not created by this bundle deployment: refusing to install it; delete it to let the bundle deployment create its own", name)
	changed := fmt.Sprintf("bundle %q no longer matches the template (its spec was changed): refusing to install it; delete it to let the bundle deployment create it again", name)

	cases := []struct {
		name     string
		bundle   *rukpakv1alpha1.Bundle
		records  []rukpakv1alpha1.GeneratedBundle
		cacheLag bool // the cache does not show the Bundle yet
		// active is status.activeBundle.
		active string
		// want: the refusal message, or "" for the Bundle being used.
		want        string
		wantRecords string
	}{
		{name: "none yet: created and recorded", wantRecords: "[{" + name + " created-uid}]"},
		{name: "its own", bundle: existing("mine", spec("registry.test/app:v1")),
			records: []rukpakv1alpha1.GeneratedBundle{{Name: name, UID: "mine"}}, wantRecords: "[{" + name + " mine}]"},
		{name: "its own, spec changed since", bundle: existing("mine", spec("registry.test/evil:v1")),
			records: []rukpakv1alpha1.GeneratedBundle{{Name: name, UID: "mine"}}, want: changed, wantRecords: "[{" + name + " mine}]"},
		{name: "someone else's, other spec", bundle: existing("theirs", spec("registry.test/evil:v1")), want: differs, wantRecords: "[]"},
		{name: "someone else's, same spec", bundle: existing("theirs", spec("registry.test/app:v1")), want: same, wantRecords: "[]"},
		{name: "recreated by someone else under a recorded name", bundle: existing("theirs", spec("registry.test/app:v1")),
			records: []rukpakv1alpha1.GeneratedBundle{{Name: name, UID: "mine"}}, want: same, wantRecords: "[{" + name + " mine}]"},
		{name: "intent only (provisioner stopped after creating): adopted if the spec is the template's", bundle: existing("mine", spec("registry.test/app:v1")),
			records: []rukpakv1alpha1.GeneratedBundle{{Name: name}}, wantRecords: "[{" + name + " mine}]"},
		{name: "intent only, other spec", bundle: existing("theirs", spec("registry.test/evil:v1")),
			records: []rukpakv1alpha1.GeneratedBundle{{Name: name}}, want: differs, wantRecords: "[{" + name + " }]"},
		{name: "installed before records existed: the active bundle is adopted", bundle: controlled(existing("mine", spec("registry.test/app:v1"))),
			active: name, wantRecords: "[{" + name + " mine}]"},
		{name: "installed before records existed: a rollout in flight with the template's spec is adopted", bundle: controlled(existing("mine", spec("registry.test/app:v1"))),
			active: "app-older", wantRecords: "[{" + name + " mine}]"},
		{name: "installed before records existed: another bundle is not", bundle: controlled(existing("theirs", spec("registry.test/evil:v1"))),
			active: "app-older", want: differs, wantRecords: "[]"},
		{name: "not installed yet, no records: a controller reference proves nothing", bundle: controlled(existing("theirs", spec("registry.test/app:v1"))),
			want: same, wantRecords: "[]"},
		{name: "created by someone else after the cache was read", bundle: existing("theirs", spec("registry.test/app:v1")), cacheLag: true,
			want: same, wantRecords: "[]"},
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
					if got := fmt.Sprint(flushed); got != "[["+"{"+name+" }]]" {
						return fmt.Errorf("creating with flushed records %s", got)
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
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "" && b.Name != name:
				t.Errorf("bundle %q, want %q", b.Name, name)
			case tc.want != "" && !errors.As(err, &refused):
				t.Fatalf("got %v, want a refusal", err)
			case tc.want != "" && refused.msg != tc.want:
				t.Errorf("refusal %q\nwant %q", refused.msg, tc.want)
			}
			if got := fmt.Sprint(bd.Status.GeneratedBundles); got != tc.wantRecords {
				t.Errorf("records %s, want %s", got, tc.wantRecords)
			}
			if tc.bundle != nil {
				got := &rukpakv1alpha1.Bundle{}
				if err := c.Get(context.Background(), client.ObjectKey{Name: name}, got); err != nil || got.UID != tc.bundle.UID {
					t.Errorf("the existing bundle was replaced or deleted: %v %v", got.UID, err)
				}
			}
		})
	}
}
