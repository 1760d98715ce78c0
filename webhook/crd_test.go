package webhook_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/crdupgrade"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/webhook"
)

const crdGroup = "crdcheck.example.com"

// crdFixture is an owned (or unowned) CRD with objects, and clients that
// collect the API server's warnings.
type crdFixture struct {
	t       *testing.T
	env     *testenv.Env
	crds    *crdClient
	name    string
	objects []*unstructured.Unstructured
}

// crdClient updates CRDs and keeps the warnings of the last request.
type crdClient struct {
	apiextensionsclient.Interface
	mu       sync.Mutex
	warnings []string
}

func (c *crdClient) HandleWarningHeader(_ int, _ string, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.warnings = append(c.warnings, text)
}

func (c *crdClient) takeWarnings() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.warnings
	c.warnings = nil
	return w
}

func newCRDClient(t *testing.T, cfg *rest.Config) *crdClient {
	t.Helper()
	c := &crdClient{}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = c
	cs, err := apiextensionsclient.NewForConfig(cfg)
	testenv.MustNotError(t, err, "creating apiextensions client")
	c.Interface = cs
	return c
}

func strEnum(vals ...string) []apiextensionsv1.JSON {
	out := make([]apiextensionsv1.JSON, 0, len(vals))
	for _, v := range vals {
		out = append(out, apiextensionsv1.JSON{Raw: []byte(`"` + v + `"`)})
	}
	return out
}

func widgetSchema() *apiextensionsv1.CustomResourceValidation {
	return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"color": {Type: "string", Enum: strEnum("red", "green", "blue")},
				"note":  {Type: "string"},
			}},
		},
	}}
}

// newWidgets creates CRD PLURAL.crdcheck.example.com, owned by
// BundleDeployment owner unless owner is empty, and one object per color.
func newWidgets(t *testing.T, env *testenv.Env, crds *crdClient, plural, owner string, colors ...string) *crdFixture {
	t.Helper()
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + crdGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: crdGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: "K" + plural, ListKind: "K" + plural + "List", Singular: plural},
			Scope: apiextensionsv1.ClusterScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: widgetSchema()},
			},
		},
	}
	if owner != "" {
		crd.Labels = map[string]string{rukpakv1alpha1.LabelOwnerKind: "BundleDeployment", rukpakv1alpha1.LabelOwnerName: owner}
	}
	_, err := crds.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
	testenv.MustNotError(t, err, "creating CRD %s", crd.Name)
	f := &crdFixture{t: t, env: env, crds: crds, name: crd.Name}
	for i, color := range colors {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(crdGroup + "/v1")
		u.SetKind("K" + plural)
		u.SetName(fmt.Sprintf("%s-%d", color, i))
		testenv.MustNotError(t, unstructured.SetNestedField(u.Object, color, "spec", "color"), "setting color")
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, testenv.WaitTimeout, true, func(ctx context.Context) (bool, error) {
			// The CRD may not be served yet.
			return env.Client.Create(ctx, u.DeepCopy()) == nil, nil
		})
		testenv.MustNotError(t, err, "creating %s %s", u.GetKind(), u.GetName())
		f.objects = append(f.objects, u)
	}
	return f
}

// update applies mutate to the live CRD through c and returns the API
// server's answer.
func (f *crdFixture) update(c *crdClient, mutate func(*apiextensionsv1.CustomResourceDefinition)) error {
	ctx := context.Background()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, f.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(crd)
		_, err = c.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
		return err
	})
}

// preflightMessage is what the provisioner's preflight says of applying
// mutate to the live CRD: the message the webhook must refuse with.
func (f *crdFixture) preflightMessage(mutate func(*apiextensionsv1.CustomResourceDefinition)) string {
	f.t.Helper()
	ctx := context.Background()
	live, err := f.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, f.name, metav1.GetOptions{})
	testenv.MustNotError(f.t, err, "getting CRD")
	next := live.DeepCopy()
	mutate(next)
	next.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(next)
	testenv.MustNotError(f.t, err, "converting CRD")
	lister, err := crdupgrade.NewRESTLister(f.env.Config, nil)
	testenv.MustNotError(f.t, err, "creating lister")
	p := &crdupgrade.Preflight{CRDs: f.env.Client, Objects: lister}
	reports, err := p.Run(ctx, []*unstructured.Unstructured{{Object: obj}})
	testenv.MustNotError(f.t, err, "running the preflight")
	msg := crdupgrade.Message(reports)
	if msg == "" {
		f.t.Fatalf("the preflight finds nothing wrong with the change")
	}
	return msg
}

func narrowEnum(crd *apiextensionsv1.CustomResourceDefinition) {
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	color := spec.Properties["color"]
	color.Enum = strEnum("red", "green")
	spec.Properties["color"] = color
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
}

// unserveStored stops serving v1, which objects are stored at, in favour
// of a new v2.
func unserveStored(crd *apiextensionsv1.CustomResourceDefinition) {
	crd.Spec.Versions[0].Served, crd.Spec.Versions[0].Storage = false, false
	crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: "v2", Served: true, Storage: true, Schema: widgetSchema()})
}

func addField(crd *apiextensionsv1.CustomResourceDefinition) {
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	spec.Properties["shape"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
}

// crdRequests counts the admission requests the CRD check has answered in
// this process (controller-runtime's webhook metrics).
func crdRequests(t *testing.T) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	testenv.MustNotError(t, err, "gathering metrics")
	var n float64
	for _, fam := range families {
		if fam.GetName() != "controller_runtime_webhook_requests_total" {
			continue
		}
		for _, m := range fam.GetMetric() {
			if labelOf(m, "webhook") == webhook.CRDPath {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

const crdDenied = `admission webhook "` + webhook.CRDWebhookName + `" denied the request: `

func wantDenied(t *testing.T, err error, msg string) {
	t.Helper()
	if err == nil || err.Error() != crdDenied+msg {
		t.Fatalf("error:\n got %v\nwant %s", err, crdDenied+msg)
	}
	if !apierrors.IsForbidden(err) {
		t.Fatalf("reason = %q, want Forbidden", apierrors.ReasonForError(err))
	}
}

func wantWarning(t *testing.T, warnings []string, part string) {
	t.Helper()
	for _, w := range warnings {
		if strings.Contains(w, part) {
			return
		}
	}
	t.Fatalf("no warning contains %q: %q", part, warnings)
}

// TestCRDUpgradeCheck drives the CRD check through the API server with the
// shipped webhook configuration (the webhook with every right here; the
// shipped RBAC is TestCRDCheckDefaultInstall's).
func TestCRDUpgradeCheck(t *testing.T) {
	env := startEnv(t, "")
	stop := runWebhook(t, env, webhook.Config{
		CertMode: webhook.CertModeCertManager,
		Server:   webhook.ServerOptions{CertDir: env.Env.WebhookInstallOptions.LocalServingCertDir},
		// Small enough for one test object to exceed it.
		CRDCheck: crdupgrade.Options{MaxObjectBytes: 16 << 10},
	})
	ctx := context.Background()
	admin := newCRDClient(t, env.Config)
	mustCreate(t, env.Client, imageBD("owner", nil))

	t.Run("a narrowed enum is refused with the preflight's message", func(t *testing.T) {
		f := newWidgets(t, env, admin, "narrowed", "owner", "red", "blue")
		want := f.preflightMessage(narrowEnum)
		if !strings.Contains(want, "EnumNarrowed") || !strings.Contains(want, "blue-1") {
			t.Fatalf("the preflight's message does not name the change and object: %s", want)
		}
		wantDenied(t, f.update(admin, narrowEnum), want)
		wantWarning(t, admin.takeWarnings(), `annotate BundleDeployment "owner" with core.rukpak.io/skip-crd-upgrade-preflight=true`)
	})
	t.Run("an un-served stored version is refused with the preflight's message", func(t *testing.T) {
		f := newWidgets(t, env, admin, "unserved", "owner", "red")
		want := f.preflightMessage(unserveStored)
		if !strings.Contains(want, "ServedVersionRemoved") {
			t.Fatalf("the preflight's message does not name the change: %s", want)
		}
		wantDenied(t, f.update(admin, unserveStored), want)
		wantWarning(t, admin.takeWarnings(), "To apply it anyway")
	})
	t.Run("a harmless edit is admitted", func(t *testing.T) {
		f := newWidgets(t, env, admin, "harmless", "owner", "red", "blue")
		admin.takeWarnings()
		before := crdRequests(t)
		testenv.MustNotError(t, f.update(admin, addField), "adding an optional field")
		if got := crdRequests(t) - before; got != 1 {
			t.Fatalf("the webhook answered %v requests, want 1", got)
		}
		if w := admin.takeWarnings(); len(w) > 0 {
			t.Fatalf("warnings: %q", w)
		}
	})
	t.Run("an object over the bounds is refused", func(t *testing.T) {
		f := newWidgets(t, env, admin, "large", "owner")
		big := &unstructured.Unstructured{}
		big.SetAPIVersion(crdGroup + "/v1")
		big.SetKind("Klarge")
		big.SetName("big")
		testenv.MustNotError(t, unstructured.SetNestedField(big.Object, "red", "spec", "color"), "setting color")
		testenv.MustNotError(t, unstructured.SetNestedField(big.Object, strings.Repeat("x", 32<<10), "spec", "note"), "setting note")
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, testenv.WaitTimeout, true, func(ctx context.Context) (bool, error) {
			return env.Client.Create(ctx, big.DeepCopy()) == nil, nil
		})
		testenv.MustNotError(t, err, "creating the large object")
		err = f.update(admin, narrowEnum)
		if err == nil || !strings.HasPrefix(err.Error(), crdDenied+"CRD upgrade preflight for CRD large."+crdGroup+" could not finish within its bounds: ") ||
			!strings.Contains(err.Error(), "object big ") || !strings.Contains(err.Error(), "16 KiB (--"+crdupgrade.FlagMaxObjectBytes+")") {
			t.Fatalf("want a refusal naming the object and the bound, got %v", err)
		}
	})
	t.Run("the skip annotation admits", func(t *testing.T) {
		mustCreate(t, env.Client, imageBD("skipping", nil))
		f := newWidgets(t, env, admin, "skipped", "skipping", "blue")
		testenv.MustNotError(t, mergePatch(env.Client, "skipping", `{"metadata":{"annotations":{"`+rukpakv1alpha1.AnnotationSkipCRDUpgradePreflight+`":"true"}}}`), "annotating")
		testenv.MustNotError(t, f.update(admin, narrowEnum), "narrowing the enum with the preflight skipped")
		wantWarning(t, admin.takeWarnings(), `was not checked against its existing objects: BundleDeployment "skipping" has core.rukpak.io/skip-crd-upgrade-preflight=true`)
	})
	t.Run("never sent", func(t *testing.T) {
		unowned := newWidgets(t, env, admin, "unowned", "", "blue")
		owned := newWidgets(t, env, admin, "owned", "owner", "blue")
		// With every right (system:masters), under the provisioners' names.
		provisioner := newCRDClient(t, impersonated(env, "system:serviceaccount:rukpak-system:rukpak-provisioner", "system:masters"))
		shard := newCRDClient(t, impersonated(env, "system:serviceaccount:rukpak-system:rukpak-provisioner-shard1", "system:masters"))
		before := crdRequests(t)
		testenv.MustNotError(t, unowned.update(admin, narrowEnum), "narrowing the enum of an unowned CRD")
		testenv.MustNotError(t, owned.update(admin, func(crd *apiextensionsv1.CustomResourceDefinition) {
			crd.Labels["team"] = "a"
			crd.Annotations = map[string]string{"note": "metadata only"}
		}), "changing an owned CRD's metadata")
		testenv.MustNotError(t, owned.update(provisioner, narrowEnum), "the provisioner narrowing the enum")
		testenv.MustNotError(t, owned.update(shard, func(crd *apiextensionsv1.CustomResourceDefinition) {
			crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["color"].Enum[0] = apiextensionsv1.JSON{Raw: []byte(`"blue"`)}
		}), "a shard's provisioner changing it")
		if got := crdRequests(t) - before; got != 0 {
			t.Fatalf("the webhook was sent %v requests, want none", got)
		}
	})
	// Last: it stops the webhook.
	t.Run("a breaking edit goes through while the webhook is down", func(t *testing.T) {
		f := newWidgets(t, env, admin, "down", "owner", "blue")
		stop()
		testenv.MustNotError(t, f.update(admin, narrowEnum), "narrowing the enum with the webhook down")
	})
}

func impersonated(env *testenv.Env, user string, groups ...string) *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return cfg
}
