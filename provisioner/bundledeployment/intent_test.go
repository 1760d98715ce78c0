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
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/release"
	helmrelease "helm.sh/helm/v3/pkg/release"
)

func intentScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := rukpakv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// TestAnnotatedIntent: the first Bundle's creation intent, in the
// annotation the finalizer's patch writes, stands for the status intent
// (no status write before the create) and lets a restarted provisioner
// adopt the Bundle it created; as user-writable input it adopts only a
// Bundle that says it is this BundleDeployment's, and only before any
// Bundle is recorded.
func TestAnnotatedIntent(t *testing.T) {
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
	// generated gives b what the provisioner gives the Bundles it
	// generates (and anyone can copy).
	generated := func(b *rukpakv1alpha1.Bundle) *rukpakv1alpha1.Bundle {
		b.OwnerReferences = []metav1.OwnerReference{{APIVersion: rukpakv1alpha1.GroupVersion.String(), Kind: "BundleDeployment", Name: "app", UID: "bd-uid", Controller: ptr(true)}}
		b.Labels = map[string]string{
			rukpakv1alpha1.LabelOwnerKind:          "BundleDeployment",
			rukpakv1alpha1.LabelOwnerName:          "app",
			rukpakv1alpha1.LabelBundleTemplateHash: hash,
		}
		return b
	}

	cases := []struct {
		name       string
		annotation *string
		bundle     *rukpakv1alpha1.Bundle
		records    []rukpakv1alpha1.GeneratedBundle
		active     string
		cacheLag   bool
		// want: the refusal message, or "" for the Bundle being used.
		want string
		// wantName: the Bundle used ("" for name; newName for a new one
		// under a random name).
		wantName    string
		wantRecords string
		// wantFlushed: the status writes before the create (or the
		// adoption's).
		wantFlushed string
		// wantAnnotation: the annotation on the stored BundleDeployment
		// afterwards ("-" for none).
		wantAnnotation string
	}{
		{name: "the annotation is the intent: no status write before the create", annotation: &name,
			wantRecords: "[{" + name + " created-uid}]", wantFlushed: "[]", wantAnnotation: name},
		{name: "the provisioner stopped after creating: adopted", annotation: &name, bundle: generated(existing("mine", spec("registry.test/app:v1"))),
			wantRecords: "[{" + name + " mine}]", wantFlushed: "[[{" + name + " mine}]]", wantAnnotation: name},
		{name: "a bundle without the controller reference and labels is not adopted", annotation: &name, bundle: existing("theirs", spec("registry.test/app:v1")),
			wantName: newName, wantRecords: "[{NEW created-uid}]", wantFlushed: "[[{NEW }]]", wantAnnotation: name},
		{name: "a controlled bundle without the owner labels is not adopted", annotation: &name,
			bundle: func() *rukpakv1alpha1.Bundle {
				b := generated(existing("theirs", spec("registry.test/app:v1")))
				b.Labels = nil
				return b
			}(),
			wantName: newName, wantRecords: "[{NEW created-uid}]", wantFlushed: "[[{NEW }]]", wantAnnotation: name},
		{name: "a controlled bundle of another spec is not adopted", annotation: &name, bundle: generated(existing("theirs", spec("registry.test/evil:v1"))),
			wantName: newName, wantRecords: "[{NEW created-uid}]", wantFlushed: "[[{NEW }]]", wantAnnotation: name},
		{name: "once a bundle is recorded the annotation is ignored", annotation: &name, bundle: generated(existing("theirs", spec("registry.test/app:v1"))),
			records:  []rukpakv1alpha1.GeneratedBundle{{Name: "app-older", UID: "older"}},
			wantName: newName, wantRecords: "[{app-older older} {NEW created-uid}]", wantFlushed: "[[{app-older older} {NEW }]]", wantAnnotation: name},
		{name: "an annotation naming another bundle is no intent for this one", annotation: ptr("app-other"),
			wantRecords: "[{" + name + " created-uid}]", wantFlushed: "[[{" + name + " }]]", wantAnnotation: "app-other"},
		{name: "an annotation that is no bundle name is ignored", annotation: ptr(name + "/" + strings.Repeat("x", 300)),
			wantRecords: "[{" + name + " created-uid}]", wantFlushed: "[[{" + name + " }]]", wantAnnotation: name + "/" + strings.Repeat("x", 300)},
		{name: "created by someone else after the cache was read: another name, and the annotation removed", annotation: &name,
			bundle: generated(existing("theirs", spec("registry.test/app:v1"))), cacheLag: true,
			wantName: newName, wantRecords: "[{NEW created-uid}]", wantFlushed: "[[{NEW }]]", wantAnnotation: "-"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bd := &rukpakv1alpha1.BundleDeployment{
				ObjectMeta: metav1.ObjectMeta{Name: "app", UID: "bd-uid", Finalizers: []string{rukpakv1alpha1.FinalizerUninstall}},
				Spec:       rukpakv1alpha1.BundleDeploymentSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Template: bdTemplate},
				Status:     rukpakv1alpha1.BundleDeploymentStatus{GeneratedBundles: tc.records, ActiveBundle: tc.active},
			}
			if tc.annotation != nil {
				bd.Annotations = map[string]string{rukpakv1alpha1.AnnotationCreatingBundle: *tc.annotation}
			}
			builder := fake.NewClientBuilder().WithScheme(intentScheme(t)).WithIndex(&rukpakv1alpha1.Bundle{}, bundleOwnerIndex, bundleOwner).
				WithObjects(bd.DeepCopy())
			if tc.bundle != nil {
				builder = builder.WithObjects(tc.bundle)
			}
			flushed := []string{}
			lagged := false
			c := builder.WithInterceptorFuncs(interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*rukpakv1alpha1.Bundle); ok && tc.cacheLag && !lagged {
						lagged = true
						return apierrors.NewNotFound(rukpakv1alpha1.GroupVersion.WithResource("bundles").GroupResource(), key.Name)
					}
					return c.Get(ctx, key, obj, opts...)
				},
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
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
			gotName := ""
			if b != nil {
				gotName = b.Name
			}
			wantName := tc.wantName
			if wantName == "" {
				wantName = name
			}
			shown := func(s string) string {
				if wantName != newName {
					return s
				}
				return randomlyNamed(t, s, "app", name, gotName)
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "" && shown(gotName) != wantName:
				t.Errorf("bundle %q, want %q", gotName, wantName)
			case tc.want != "" && !errors.As(err, &refused):
				t.Fatalf("got %v, want a refusal", err)
			case tc.want != "" && refused.msg != tc.want:
				t.Errorf("refusal %q\nwant %q", refused.msg, tc.want)
			}
			if got := shown(fmt.Sprint(bd.Status.GeneratedBundles)); got != tc.wantRecords {
				t.Errorf("records %s, want %s", got, tc.wantRecords)
			}
			if got := shown(fmt.Sprint(flushed)); got != tc.wantFlushed {
				t.Errorf("status writes %s, want %s", got, tc.wantFlushed)
			}
			stored := &rukpakv1alpha1.BundleDeployment{}
			if err := c.Get(context.Background(), client.ObjectKey{Name: "app"}, stored); err != nil {
				t.Fatal(err)
			}
			got, ok := stored.Annotations[rukpakv1alpha1.AnnotationCreatingBundle]
			if !ok {
				got = "-"
			}
			if got != tc.wantAnnotation {
				t.Errorf("annotation %q, want %q", got, tc.wantAnnotation)
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

// TestEnsureFinalizerWritesIntent: the finalizer's patch carries the first
// Bundle's intent, and only when that Bundle is about to be created.
func TestEnsureFinalizerWritesIntent(t *testing.T) {
	template := rukpakv1alpha1.BundleTemplate{Spec: rukpakv1alpha1.BundleSpec{
		ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
		Source:               rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: "registry.test/app:v1"}},
	}}
	hash, err := TemplateHash(template)
	if err != nil {
		t.Fatal(err)
	}
	name := "app-" + hash
	for _, tc := range []struct {
		name string
		// finalized: the finalizer is there already.
		finalized, paused, bundleExists bool
		annotation                      string
		status                          rukpakv1alpha1.BundleDeploymentStatus
		wantPatches                     int
		wantAnnotation                  string // "-": none
	}{
		{name: "first reconcile: finalizer and intent in one patch", wantPatches: 1, wantAnnotation: name},
		{name: "a value someone set is replaced", annotation: "app-other", wantPatches: 1, wantAnnotation: name},
		{name: "a bundle exists under the name: no intent, and someone's value removed", bundleExists: true, annotation: name, wantPatches: 1, wantAnnotation: "-"},
		{name: "paused: no intent", paused: true, wantPatches: 1, wantAnnotation: "-"},
		{name: "a bundle recorded already: no intent", status: rukpakv1alpha1.BundleDeploymentStatus{GeneratedBundles: []rukpakv1alpha1.GeneratedBundle{{Name: "app-older", UID: "u"}}},
			wantPatches: 1, wantAnnotation: "-"},
		{name: "finalizer there: no write at all", finalized: true, annotation: "anything", wantPatches: 0, wantAnnotation: "anything"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bd := &rukpakv1alpha1.BundleDeployment{
				ObjectMeta: metav1.ObjectMeta{Name: "app", UID: "bd-uid"},
				Spec:       rukpakv1alpha1.BundleDeploymentSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Template: template, Paused: tc.paused},
				Status:     tc.status,
			}
			if tc.finalized {
				bd.Finalizers = []string{rukpakv1alpha1.FinalizerUninstall}
			}
			if tc.annotation != "" {
				bd.Annotations = map[string]string{rukpakv1alpha1.AnnotationCreatingBundle: tc.annotation}
			}
			builder := fake.NewClientBuilder().WithScheme(intentScheme(t)).WithStatusSubresource(&rukpakv1alpha1.BundleDeployment{}).WithObjects(bd.DeepCopy())
			if tc.bundleExists {
				builder = builder.WithObjects(&rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "theirs"}})
			}
			patches := 0
			c := builder.WithInterceptorFuncs(interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					patches++
					return c.Patch(ctx, obj, patch, opts...)
				},
			}).Build()
			r := &Reconciler{Client: c}
			if err := r.ensureFinalizer(context.Background(), bd); err != nil {
				t.Fatal(err)
			}
			if patches != tc.wantPatches {
				t.Errorf("%d patches, want %d", patches, tc.wantPatches)
			}
			stored := &rukpakv1alpha1.BundleDeployment{}
			if err := c.Get(context.Background(), client.ObjectKey{Name: "app"}, stored); err != nil {
				t.Fatal(err)
			}
			got, ok := stored.Annotations[rukpakv1alpha1.AnnotationCreatingBundle]
			if !ok {
				got = "-"
			}
			if got != tc.wantAnnotation {
				t.Errorf("annotation %q, want %q", got, tc.wantAnnotation)
			}
			if len(stored.Finalizers) != 1 || stored.Finalizers[0] != rukpakv1alpha1.FinalizerUninstall {
				t.Errorf("finalizers %v", stored.Finalizers)
			}
		})
	}
}

// TestOnlyFillsIntents: a status that differs from what the API server
// holds only by the UIDs of Bundles whose intent is stored (in status or,
// for the first Bundle, in the annotation) is not written.
func TestOnlyFillsIntents(t *testing.T) {
	cond := []metav1.Condition{{Type: rukpakv1alpha1.TypeInstalled, Status: metav1.ConditionTrue}}
	for _, tc := range []struct {
		name      string
		persisted []rukpakv1alpha1.GeneratedBundle
		now       rukpakv1alpha1.BundleDeploymentStatus
		annotated string
		want      bool
	}{
		{name: "status intent filled", persisted: []rukpakv1alpha1.GeneratedBundle{{Name: "a"}},
			now: rukpakv1alpha1.BundleDeploymentStatus{GeneratedBundles: []rukpakv1alpha1.GeneratedBundle{{Name: "a", UID: "u"}}}, want: true},
		{name: "annotated intent filled", annotated: "a",
			now: rukpakv1alpha1.BundleDeploymentStatus{GeneratedBundles: []rukpakv1alpha1.GeneratedBundle{{Name: "a", UID: "u"}}}, want: true},
		{name: "annotated intent filled, with the generation observed", annotated: "a",
			now: rukpakv1alpha1.BundleDeploymentStatus{GeneratedBundles: []rukpakv1alpha1.GeneratedBundle{{Name: "a", UID: "u"}}, ObservedGeneration: 1}, want: true},
		{name: "status intent filled, with the generation observed", persisted: []rukpakv1alpha1.GeneratedBundle{{Name: "a"}},
			now: rukpakv1alpha1.BundleDeploymentStatus{GeneratedBundles: []rukpakv1alpha1.GeneratedBundle{{Name: "a", UID: "u"}}, ObservedGeneration: 1}},
		{name: "only the generation observed", annotated: "a", now: rukpakv1alpha1.BundleDeploymentStatus{ObservedGeneration: 1}},
		{name: "annotated intent filled, and a condition changed", annotated: "a",
			now: rukpakv1alpha1.BundleDeploymentStatus{GeneratedBundles: []rukpakv1alpha1.GeneratedBundle{{Name: "a", UID: "u"}}, Conditions: cond}},
		{name: "another bundle recorded than the annotated one", annotated: "a",
			now: rukpakv1alpha1.BundleDeploymentStatus{GeneratedBundles: []rukpakv1alpha1.GeneratedBundle{{Name: "b", UID: "u"}}}},
		{name: "no intent", now: rukpakv1alpha1.BundleDeploymentStatus{GeneratedBundles: []rukpakv1alpha1.GeneratedBundle{{Name: "a", UID: "u"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			persisted := &rukpakv1alpha1.BundleDeploymentStatus{GeneratedBundles: tc.persisted}
			if got := onlyFillsIntents(persisted, &tc.now, tc.annotated); got != tc.want {
				t.Errorf("onlyFillsIntents = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestInstalledEvent: a first install emits no event (its Installed
// condition says it all); an upgrade says from which Bundle to which.
func TestInstalledEvent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		active   string
		upgraded bool
		want     string
	}{
		{name: "first install", want: ""},
		{name: "pivot", active: "app-old", upgraded: true, want: `Normal InstallationSucceeded Upgraded from bundle "app-old" to "app-new" (release revision 2)`},
		{name: "upgrade in place", active: "app-new", upgraded: true, want: `Normal InstallationSucceeded Upgraded bundle "app-new" in place (release revision 2)`},
		{name: "release records gone", active: "app-new", want: `Normal InstallationSucceeded Installed bundle "app-new" again (release revision 2)`},
		{name: "release records gone, another bundle", active: "app-old", want: `Normal InstallationSucceeded Installed bundle "app-new" in place of "app-old" (release revision 2)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(4)
			r := &Reconciler{Recorder: rec}
			bd := &rukpakv1alpha1.BundleDeployment{Status: rukpakv1alpha1.BundleDeploymentStatus{ActiveBundle: tc.active}}
			b := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app-new"}}
			r.installedEvent(bd, b, &release.Result{Upgraded: tc.upgraded, Changed: true, Release: &helmrelease.Release{Version: 2}})
			got := ""
			select {
			case got = <-rec.Events:
			default:
			}
			if got != tc.want {
				t.Errorf("event %q, want %q", got, tc.want)
			}
		})
	}
}
