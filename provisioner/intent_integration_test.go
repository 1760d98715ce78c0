package provisioner_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/bundledeployment"
)

// refusing returns a copy of cfg whose clients get 403 Forbidden, without
// the API server seeing them, for the requests refuse picks: a provisioner
// stopped at that point, as far as the API server can tell.
func refusing(cfg *rest.Config, refuse func(*http.Request) bool) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTrip(func(req *http.Request) (*http.Response, error) {
			if !refuse(req) {
				return rt.RoundTrip(req)
			}
			const body = `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"refused by the test","reason":"Forbidden","code":403}`
			return &http.Response{
				StatusCode: http.StatusForbidden, Status: "403 Forbidden", Request: req,
				Header: http.Header{"Content-Type": {"application/json"}},
				Body:   io.NopCloser(strings.NewReader(body)),
			}, nil
		})
	})
	return cfg
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestIntegrationCreationIntentAnnotation: the first Bundle's creation
// intent is the annotation the finalizer's patch writes (issue 15 item 3),
// and it keeps what the status intent guaranteed (issue 11): a provisioner
// stopped before the create creates the Bundle once; one stopped after the
// create, before the status write that records its UID, adopts it rather
// than stranding it or creating another. And a value set by the
// BundleDeployment's author does not make it adopt a Bundle someone
// created ahead of it.
func TestIntegrationCreationIntentAnnotation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	orig := h.env.Config
	t.Cleanup(func() { h.env.Config = orig })
	restart := func(cfg *rest.Config) {
		h.kill()
		h.env.Config = cfg
		h.start()
	}
	const bundles = "/apis/core.rukpak.io/v1alpha1/bundles"
	src := h.pushBundle("intent-v1", map[string]string{"manifests/cm.yaml": configMap("intent-config", "v1")})
	bd := newBD("intent", src)
	hash, err := bundledeployment.TemplateHash(bd.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	name := "intent-" + hash

	// Stopped before the create: the intent is stored, with the finalizer,
	// in the annotation; the status records nothing.
	restart(refusing(orig, func(req *http.Request) bool {
		return req.Method == http.MethodPost && req.URL.Path == bundles
	}))
	if err := h.c.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the finalizer and the intent", func() error {
		got := h.bd("intent")
		if !slices.Contains(got.Finalizers, rukpakv1alpha1.FinalizerUninstall) || got.Annotations[rukpakv1alpha1.AnnotationCreatingBundle] != name {
			return fmt.Errorf("finalizers %v, annotations %v", got.Finalizers, got.Annotations)
		}
		return nil
	})
	if got := h.bd("intent").Status.GeneratedBundles; len(got) != 0 {
		t.Errorf("status.generatedBundles %v: the intent was written to the status too", got)
	}
	if b, err := h.getBundle(name); b != nil || err != nil {
		t.Fatalf("bundle %s created although its creation was refused: %v", name, err)
	}

	// Stopped after the create, before the UID is recorded: no status write
	// of the BundleDeployment reaches the API server.
	restart(refusing(orig, func(req *http.Request) bool {
		return req.Method != http.MethodGet && strings.HasPrefix(req.URL.Path, "/apis/core.rukpak.io/v1alpha1/bundledeployments/") && strings.HasSuffix(req.URL.Path, "/status")
	}))
	var created *rukpakv1alpha1.Bundle
	eventually(t, "the bundle created", func() error {
		b, err := h.getBundle(name)
		if b == nil {
			return fmt.Errorf("no bundle %s yet: %w", name, err)
		}
		created = b
		return nil
	})
	h.waitBundle(name, rukpakv1alpha1.PhaseUnpacked, rukpakv1alpha1.ReasonUnpackSuccessful, "")
	if got := h.bd("intent").Status.GeneratedBundles; len(got) != 0 {
		t.Fatalf("status.generatedBundles %v written although status writes were refused", got)
	}

	// The restarted provisioner adopts the Bundle it created, and only it.
	restart(orig)
	got := h.waitBD("intent", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, name)
	if want := fmt.Sprintf("[{%s %s}]", name, created.UID); fmt.Sprint(got.Status.GeneratedBundles) != want || got.Status.ActiveBundle != name {
		t.Errorf("activeBundle %q, records %v; want %q, %s", got.Status.ActiveBundle, got.Status.GeneratedBundles, name, want)
	}
	list := &rukpakv1alpha1.BundleList{}
	if err := h.c.List(ctx, list, client.MatchingLabels{rukpakv1alpha1.LabelOwnerName: "intent"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].UID != created.UID {
		t.Errorf("bundles of the bundle deployment: %d, want only %s (%s)", len(list.Items), name, created.UID)
	}
	if cm, err := h.getCM("intent-config"); err != nil || cm.Data["value"] != "v1" {
		t.Errorf("installed content: %v %v", cm.Data, err)
	}

	// Its author sets the annotation on a new BundleDeployment, and someone
	// creates its Bundle first, with its controller reference and labels:
	// not adopted (the BundleDeployment creates its own under another
	// name), and the annotation removed.
	h.kill()
	hostile := newBD("preset", h.pushBundle("preset-v1", map[string]string{"manifests/cm.yaml": configMap("preset-config", "v1")}))
	phash, err := bundledeployment.TemplateHash(hostile.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	pname := "preset-" + phash
	hostile.Annotations = map[string]string{rukpakv1alpha1.AnnotationCreatingBundle: pname}
	if err := h.c.Create(ctx, hostile); err != nil {
		t.Fatal(err)
	}
	owner := h.bd("preset")
	ahead := &rukpakv1alpha1.Bundle{
		ObjectMeta: metav1.ObjectMeta{
			Name: pname,
			Labels: map[string]string{
				rukpakv1alpha1.LabelOwnerKind:          "BundleDeployment",
				rukpakv1alpha1.LabelOwnerName:          "preset",
				rukpakv1alpha1.LabelBundleTemplateHash: phash,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: rukpakv1alpha1.GroupVersion.String(), Kind: "BundleDeployment", Name: "preset", UID: owner.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: hostile.Spec.Template.Spec,
	}
	if err := h.c.Create(ctx, ahead); err != nil {
		t.Fatal(err)
	}
	h.start()
	got = h.waitBD("preset", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	if own := h.bundle(got.Status.ActiveBundle); got.Annotations[rukpakv1alpha1.AnnotationCreatingBundle] != "" || own.Name == pname ||
		fmt.Sprint(got.Status.GeneratedBundles) != fmt.Sprintf("[{%s %s}]", own.Name, own.UID) {
		t.Errorf("annotations %v, records %v, activeBundle %q: the bundle created ahead was taken", got.Annotations, got.Status.GeneratedBundles, got.Status.ActiveBundle)
	}
	if b := h.bundle(pname); b.UID != ahead.UID {
		t.Errorf("the bundle created ahead was replaced")
	}
}
