package install

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

func bdWith(config string) *rukpakv1alpha1.BundleDeployment {
	bd := &rukpakv1alpha1.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "app"}}
	if config != "" {
		bd.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(config)}
	}
	return bd
}

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		config, err string
	}{
		{`{"installNamespace":"apps","values":"a: 1","valuesFrom":[{"kind":"Secret","name":"s","key":"v.yaml","optional":true}]}`, ""},
		{`{"installNamespace":"apps","timeout":"90s"}`, ""},
		{`{"installNamespace":"apps","timeout":"2h"}`, `spec.config.timeout "2h" is not a duration between 0 and 30m0s (e.g. 90s, 10m)`},
		{`{"installNamespace":"apps","timeout":"soon"}`, `spec.config.timeout "soon" is not a duration between 0 and 30m0s (e.g. 90s, 10m)`},
		{``, "spec.config.installNamespace is required for helm charts: it is the release's namespace (.Release.Namespace), where objects without a namespace go"},
		{`{"installNamespace":"Apps"}`, `spec.config.installNamespace "Apps" is not a valid namespace name: a lowercase RFC 1123 label must consist of`},
		{`{"installNamespace":"rukpak-system"}`, `spec.config.installNamespace "rukpak-system" is the provisioner's namespace, which holds release records and credentials: charts may not install objects there`},
		{`{"installNamespace":"apps","valuse":"a: 1"}`, `invalid spec.config: json: unknown field "valuse"`},
		// helmvalues checks the sources (its tests list every case).
		{`{"installNamespace":"apps","valuesFrom":[{"kind":"Pod","name":"p"}]}`, `spec.config.valuesFrom[0].kind: Unsupported value: "Pod": supported values: "ConfigMap", "Secret"`},
		{`{"installNamespace":"apps","valuesFrom":[{"kind":"ConfigMap","name":"x","key":"a/b"}]}`, `spec.config.valuesFrom[0].key: Invalid value: "a/b": a valid config key must consist of`},
		{`{"installNamespace":"apps","valuesFrom":[{"kind":"ConfigMap","name":"x","optional":true,"secret":true}]}`, `invalid spec.config: json: unknown field "secret"`},
	} {
		_, err := ParseConfig(bdWith(tc.config), "rukpak-system")
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.config, err)
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.config, err, tc.err)
		}
	}
}

// refusing is a reader whose identity may not read the objects named in
// refused (the API server answers Forbidden whether they exist or not), and
// fails with err on the rest when err is set.
type refusing struct {
	client.Reader
	refused map[string]bool
	err     error
}

func (r refusing) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if r.refused[key.Name] {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, key.Name, errors.New("no"))
	}
	if r.err != nil {
		return r.err
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

func TestMergedValues(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	labelled := map[string]string{LabelValuesSource: "true"}
	fc := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "base", Namespace: "ns", Labels: labelled},
			Data: map[string]string{"values.yaml": "image: {repo: a, tag: v1}\nlist: [1, 2]\nkeep: true\n"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "over", Namespace: "ns", Labels: labelled},
			Data: map[string][]byte{"prod.yaml": []byte("image: {tag: v2}\nlist: [3]\n")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "binary", Namespace: "ns", Labels: labelled},
			BinaryData: map[string][]byte{"values.yaml": []byte("fromBinary: true\n")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "ns"}, Data: map[string]string{"values.yaml": "a: 1"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "ns"}, Data: map[string][]byte{"values.yaml": []byte("password: s3cret")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "refused", Namespace: "ns", Labels: labelled}, Data: map[string][]byte{"values.yaml": []byte("password: s3cret")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "notmap", Namespace: "ns", Labels: labelled}, Data: map[string]string{"values.yaml": "- 1"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "huge", Namespace: "ns", Labels: labelled}, Data: map[string]string{"values.yaml": "a: " + strings.Repeat("x", maxValuesBytes-4)}},
	).Build()
	r := refusing{Reader: fc, refused: map[string]bool{"refused": true, "refused-missing": true}}
	// One message whatever of the three it is: the author learns nothing
	// about the namespace's other Secrets and ConfigMaps.
	unusable := func(kind, name string) string {
		return "spec.config.valuesFrom[0]: " + kind + " ns/" + name +
			" does not exist, is not labelled core.rukpak.io/helm-values=true, or may not be read by service account team/sa"
	}
	for _, tc := range []struct {
		name   string
		config string
		reader client.Reader
		want   map[string]any
		err    string
	}{{
		name:   "merged in order, spec.config.values last",
		config: `{"installNamespace":"apps","values":"image:\n  repo: b\n","valuesFrom":[{"kind":"ConfigMap","name":"base"},{"kind":"Secret","name":"over","key":"prod.yaml"},{"kind":"ConfigMap","name":"gone","optional":true},{"kind":"ConfigMap","name":"binary"}]}`,
		want:   map[string]any{"image": map[string]any{"repo": "b", "tag": "v2"}, "list": []any{float64(3)}, "keep": true, "fromBinary": true},
	}, {
		name:   "optional: missing and not labelled are skipped alike",
		config: `{"installNamespace":"apps","values":"b: 2","valuesFrom":[{"kind":"Secret","name":"gone","optional":true},{"kind":"Secret","name":"plain","optional":true},{"kind":"ConfigMap","name":"plain","optional":true}]}`,
		want:   map[string]any{"b": float64(2)},
	}, {
		name:   "missing",
		config: `{"installNamespace":"apps","valuesFrom":[{"kind":"Secret","name":"gone"}]}`,
		err:    unusable("Secret", "gone"),
	}, {
		name:   "not labelled",
		config: `{"installNamespace":"apps","valuesFrom":[{"kind":"Secret","name":"plain"}]}`,
		err:    unusable("Secret", "plain"),
	}, {
		name:   "refused",
		config: `{"installNamespace":"apps","valuesFrom":[{"kind":"Secret","name":"refused"}]}`,
		err:    unusable("Secret", "refused"),
	}, {
		name:   "refused and missing",
		config: `{"installNamespace":"apps","valuesFrom":[{"kind":"Secret","name":"refused-missing"}]}`,
		err:    unusable("Secret", "refused-missing"),
	}, {
		name:   "optional but refused",
		config: `{"installNamespace":"apps","valuesFrom":[{"kind":"Secret","name":"refused-missing","optional":true}]}`,
		err:    "spec.config.valuesFrom[0]: optional Secret ns/refused-missing may not be read by service account team/sa (an optional source is skipped when it does not exist or is not labelled core.rukpak.io/helm-values=true, never when reading it is refused)",
	}, {
		name:   "the API server fails",
		config: `{"installNamespace":"apps","valuesFrom":[{"kind":"Secret","name":"over","optional":true}]}`,
		reader: refusing{Reader: fc, err: apierrors.NewServiceUnavailable("etcd is down")},
		err:    "spec.config.valuesFrom[0]: reading Secret ns/over as service account team/sa: etcd is down",
	}, {
		name:   "missing key",
		config: `{"installNamespace":"apps","valuesFrom":[{"kind":"Secret","name":"over"}]}`,
		err:    `spec.config.valuesFrom[0]: Secret ns/over has no key "values.yaml"`,
	}, {
		name:   "not a map",
		config: `{"installNamespace":"apps","valuesFrom":[{"kind":"ConfigMap","name":"notmap"}]}`,
		err:    `spec.config.valuesFrom[0]: ConfigMap ns/notmap key "values.yaml" is not a YAML map of values: `,
	}, {
		name:   "too large together",
		config: `{"installNamespace":"apps","values":"b: 2","valuesFrom":[{"kind":"ConfigMap","name":"huge"}]}`,
		err:    "spec.config.values: the values documents are larger than the maximum 1048576 bytes together",
	}, {
		name:   "bad inline values",
		config: `{"installNamespace":"apps","values":"a: [1"}`,
		err:    "spec.config.values is not a YAML map of values: ",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig(bdWith(tc.config), "rukpak-system")
			if err != nil {
				t.Fatal(err)
			}
			reader := tc.reader
			if reader == nil {
				reader = r
			}
			got, err := cfg.MergedValues(context.Background(), reader, "ns", "service account team/sa")
			if tc.err != "" {
				// Exact, but for the wrapped YAML errors.
				wrapped := strings.HasSuffix(tc.err, ": ")
				if err == nil || err.Error() != tc.err && (!wrapped || !strings.HasPrefix(err.Error(), tc.err)) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("values %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPostRenderer(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot)
	stamp := func(o *unstructured.Unstructured) {
		l := o.GetLabels()
		l[rukpakv1alpha1.LabelOwnerName] = "app"
		o.SetLabels(l)
		o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: rukpakv1alpha1.GroupVersion.String(), Kind: "BundleDeployment", Name: "app"}})
	}
	pr := &postRenderer{stamp: stamp, release: "app", namespace: "apps", forbidden: "rukpak-system", mapper: mapper}
	out, err := pr.Run(bytes.NewBufferString(`---
# Source: app/templates/cm.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
data: {k: v}
---
# Source: app/templates/role.yaml
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: r
  namespace: apps
  annotations: {helm.sh/resource-policy: keep}
---
# Source: app/templates/empty.yaml
# only a comment
`))
	if err != nil {
		t.Fatal(err)
	}
	want := `---
# Source: app/templates/cm.yaml
apiVersion: v1
data:
  k: v
kind: ConfigMap
metadata:
  annotations:
    meta.helm.sh/release-name: app
    meta.helm.sh/release-namespace: apps
  labels:
    app.kubernetes.io/managed-by: Helm
    core.rukpak.io/owner-name: app
  name: a
  namespace: apps
  ownerReferences:
  - apiVersion: core.rukpak.io/v1alpha1
    kind: BundleDeployment
    name: app
    uid: ""
---
# Source: app/templates/role.yaml
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  annotations:
    helm.sh/resource-policy: keep
    meta.helm.sh/release-name: app
    meta.helm.sh/release-namespace: apps
  labels:
    app.kubernetes.io/managed-by: Helm
    core.rukpak.io/owner-name: app
  name: r
`
	if out.String() != want {
		t.Fatalf("post-rendered:\n%s\nwant:\n%s", out, want)
	}
	objs, err := release.DecodeManifest(out.String())
	if err != nil || len(objs) != 2 {
		t.Fatalf("decoded %d objects: %v", len(objs), err)
	}

	_, err = pr.Run(bytes.NewBufferString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: rukpak-system\n"))
	if want := `ConfigMap rukpak-system/a is in the provisioner's namespace "rukpak-system", which holds release records and credentials: charts may not install objects there`; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

func TestFailure(t *testing.T) {
	rel := &helmrelease.Release{Hooks: []*helmrelease.Hook{
		{Name: "ok", Kind: "Job", Path: "c/templates/a.yaml", Events: []helmrelease.HookEvent{helmrelease.HookPreUpgrade}, LastRun: helmrelease.HookExecution{Phase: helmrelease.HookPhaseSucceeded}},
		{Name: "bad", Kind: "Job", Path: "c/templates/b.yaml", Events: []helmrelease.HookEvent{helmrelease.HookPreInstall, helmrelease.HookPreUpgrade}, LastRun: helmrelease.HookExecution{Phase: helmrelease.HookPhaseFailed}},
	}}
	if got, want := failure(rel, "job failed"), "pre-install,pre-upgrade hook Job bad (c/templates/b.yaml) failed: job failed"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	if got := failure(&helmrelease.Release{}, "render failed"); got != "render failed" {
		t.Fatalf("%q without a failed hook", got)
	}
}

func TestInputsDigest(t *testing.T) {
	ch := func(tmpl string) *chart.Chart {
		c := &chart.Chart{Metadata: &chart.Metadata{Name: "c", Version: "1.0.0", APIVersion: "v2"}, Templates: []*chart.File{{Name: "templates/a.yaml", Data: []byte(tmpl)}}}
		sub := &chart.Chart{Metadata: &chart.Metadata{Name: "sub", Version: "1.0.0", APIVersion: "v2"}, Templates: []*chart.File{{Name: "templates/s.yaml", Data: []byte("s")}}}
		c.AddDependency(sub)
		return c
	}
	base, err := inputsDigest(ch("a"), map[string]any{"x": 1, "y": map[string]any{"b": 2, "a": 1}}, "ns")
	if err != nil {
		t.Fatal(err)
	}
	same, _ := inputsDigest(ch("a"), map[string]any{"y": map[string]any{"a": 1, "b": 2}, "x": 1}, "ns")
	if same != base || len(base) != 40 {
		t.Fatalf("digest %q then %q, want the same 40 characters", base, same)
	}
	sub := ch("a")
	sub.Dependencies()[0].Templates[0].Data = []byte("changed")
	for name, c := range map[string]struct {
		ch   *chart.Chart
		vals map[string]any
		ns   string
	}{
		"template": {ch("b"), map[string]any{"x": 1, "y": map[string]any{"b": 2, "a": 1}}, "ns"},
		"subchart": {sub, map[string]any{"x": 1, "y": map[string]any{"b": 2, "a": 1}}, "ns"},
		"values":   {ch("a"), map[string]any{"x": 2, "y": map[string]any{"b": 2, "a": 1}}, "ns"},
		"ns":       {ch("a"), map[string]any{"x": 1, "y": map[string]any{"b": 2, "a": 1}}, "other"},
	} {
		if d, _ := inputsDigest(c.ch, c.vals, c.ns); d == base {
			t.Errorf("a change of %s keeps the digest", name)
		}
	}
}

func TestLookupGuard(t *testing.T) {
	g := lookupGuard{forbidden: "rukpak-system"}
	for _, tc := range []struct {
		method, path, err string
	}{
		{"GET", "/api/v1/namespaces/apps/secrets/s", ""},
		{"GET", "/apis/apps/v1/namespaces/apps/deployments", ""},
		{"GET", "/api/v1/namespaces", ""},
		{"GET", "/api/v1/namespaces/rukpak-system", `a chart's lookup may not read the provisioner's namespace "rukpak-system"`},
		{"GET", "/api/v1/namespaces/rukpak-system/secrets/sh.helm.release.v1.x.v1", `a chart's lookup may not read the provisioner's namespace "rukpak-system"`},
		{"GET", "/apis/core.rukpak.io/v1alpha1/namespaces/rukpak-system/things", `a chart's lookup may not read the provisioner's namespace "rukpak-system"`},
		{"GET", "/api/v1/secrets", "a chart's lookup may not list secrets across namespaces (the provisioner's namespace holds its credentials)"},
		{"GET", "/api/v1/configmaps", "a chart's lookup may not list configmaps across namespaces (the provisioner's namespace holds its credentials)"},
		{"GET", "/apis/apps/v1/deployments", ""},
		{"DELETE", "/api/v1/namespaces/apps/secrets/s", "a chart's lookup may only read (DELETE /api/v1/namespaces/apps/secrets/s)"},
	} {
		err := g.allowed(tc.method, tc.path)
		if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("%s %s: %v, want %q", tc.method, tc.path, err, tc.err)
		}
	}
}
