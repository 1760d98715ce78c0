package release

import (
	"context"
	"sync"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// TestIntegrationFirstInstallRecordedByAnotherProcess plays a sharded
// BundleDeployment moved while the instance it left was installing it for
// the first time: the instance it joined installs it too and records the
// release's first revision before the first instance's apply ends. A first
// install writes its record once, after the apply, so the first instance
// finds the revision taken. The release holds what both applied: that
// instance's install succeeds (it used to fail with "release: already
// exists", and the failure was written to the status of a BundleDeployment
// that instance no longer reconciles), and when the other recorded other
// objects it still fails.
func TestIntegrationFirstInstallRecordedByAnotherProcess(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	ctx := context.Background()
	ns, apps := testenv.Namespace(t, env, "rukpak-system"), testenv.Namespace(t, env, "apps")
	left, err := NewManager(env.Config, ns)
	testenv.MustNotError(t, err, "creating the manager of the instance left")
	joined, err := NewManager(env.Config, ns)
	testenv.MustNotError(t, err, "creating the manager of the instance joined")

	// installing is left's install of objs as release name; the other
	// instance installs theirs, to the end, when left's first apply
	// request is under way.
	installing := func(name string, objs, theirs []*unstructured.Unstructured) (*Result, error) {
		var once sync.Once
		wc, err := client.NewWithWatch(env.Config, client.Options{})
		testenv.MustNotError(t, err, "creating a client")
		c := interceptor.NewClient(wc, interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				once.Do(func() {
					if _, err := joined.Apply(ctx, name, theirs, nil); err != nil {
						t.Errorf("the other instance's install of %s: %v", name, err)
					}
				})
				return c.Patch(ctx, obj, patch, opts...)
			},
		})
		return left.As(c).Apply(ctx, name, objs, nil)
	}
	objs := []*unstructured.Unstructured{configMap(apps, "moved-a", "v1"), configMap(apps, "moved-b", "v1")}

	res, err := installing("moved", objs, objs)
	if err != nil {
		t.Fatalf("install whose revision another instance recorded with the same objects: %v", err)
	}
	if res.Release == nil || res.Release.Version != 1 || res.Release.Info.Status != helmrelease.StatusDeployed || !res.Changed || len(res.Objects) != 2 {
		t.Errorf("result %+v, want deployed revision 1, changed, 2 objects", res)
	}
	hist, err := left.store.History("moved")
	testenv.MustNotError(t, err, "reading the history")
	if len(hist) != 1 || hist[0].Info.Status != helmrelease.StatusDeployed {
		t.Errorf("history of %d revisions, want revision 1 deployed", len(hist))
	}
	again, err := left.Apply(ctx, "moved", objs, nil)
	if err != nil || again.Changed || again.Release.Version != 1 {
		t.Errorf("re-apply: changed %v, err %v; want revision 1 unchanged", again.Changed, err)
	}

	// Another instance recording other objects is not this install.
	_, err = installing("differs", []*unstructured.Unstructured{configMap(apps, "differs", "mine")},
		[]*unstructured.Unstructured{configMap(apps, "differs", "theirs")})
	if err == nil {
		t.Error("install whose revision another instance recorded with other objects succeeded")
	}
}
