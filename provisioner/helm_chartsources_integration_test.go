package provisioner_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"sigs.k8s.io/yaml"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/selfsigned"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testgit"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/helm"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// chartInstall is one install of a chart of the shared test data from one
// source type.
type chartInstall struct {
	// name is the BundleDeployment's, its release's and its install
	// namespace's.
	name, chart string
	source      func(h *harness) rukpakv1alpha1.BundleSource
	// values, when set, returns spec.config.values, after creating what
	// they refer to in the install namespace.
	values func(h *harness) string
	// kinds must be among the chart's objects, so that a chart rendering
	// (next to) nothing cannot pass.
	kinds []string
	// check checks what only this chart installs, given its live objects.
	check func(h *harness, live []*unstructured.Unstructured)
}

// Installs through the helm class, on a loaded 2-core machine, take
// minutes: prometheus-operator-crds (4.4 MB of CRDs) alongside the other
// installs. A CRD deleted moments after it was established can meet the API
// server's cleanup while its storage still initialises, which it retries
// with a backoff that can pass a minute (see
// TestIntegrationPlainPrometheusOperatorCRDs). Both wait as long as
// eventually does, which covers them.
const (
	chartInstallTimeout   = testenv.WaitTimeout
	chartUninstallTimeout = testenv.WaitTimeout
)

// TestIntegrationHelmChartSources installs every chart of the shared test
// data from a source type no other test installs it from, so that with
// them each chart installs from at least two (issue #14):
//
//	chart                                  here                      elsewhere
//	hello-world                            git, configMaps           image (TestIntegrationHelmInstall)
//	kube-state-metrics                     Helm OCI artifact         http (TestIntegrationHelmInstall)
//	prometheus-operator-admission-webhook  http (https)              image (TestIntegrationHelmAdmissionWebhookChart)
//	prometheus-operator-crds               Helm OCI artifact         image (TestIntegrationHelmPrometheusOperatorCRDs)
//
// Each install reaches Installed=True as revision 1 of the chart that was
// sent; its objects are exactly those the chart on disk renders to for
// this cluster, each live and carrying the release's ownership; the
// uninstall removes them all and the release records.
func TestIntegrationHelmChartSources(t *testing.T) {
	t.Parallel()
	h := newHarness(t)

	root := testgit.NewRoot(t)
	repo := root.NewRepo("charts")
	repo.WriteFiles(chartFiles(t, "hello-world", "charts/hello-world"))
	repo.Commit("hello-world")
	gitSrv := root.ServeHTTP(testgit.HTTPOptions{})
	httpsSrv := newTLSChartServer(t)

	// The artifact `helm package` then `helm push` makes.
	helmOCI := func(chart string) func(h *harness) rukpakv1alpha1.BundleSource {
		return func(h *harness) rukpakv1alpha1.BundleSource {
			ref := h.reg.PushChart(h.t, "helm-charts", helmPackage(h.t, loadTestChart(h.t, chart)), nil)
			return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{
				Ref: ref, CertificateData: string(h.reg.CAPEM),
			}}
		}
	}
	// A chart's values reach the chart from every source.
	replicas := func(want int32) func(h *harness, live []*unstructured.Unstructured) {
		return func(h *harness, live []*unstructured.Unstructured) {
			dep := &appsv1.Deployment{}
			convertOne(h.t, live, "Deployment", dep)
			if dep.Spec.Replicas == nil || *dep.Spec.Replicas != want {
				h.t.Errorf("Deployment %s: replicas %v, want %d", dep.Name, dep.Spec.Replicas, want)
			}
		}
	}

	installs := []chartInstall{{
		name: "hello-world-git", chart: "hello-world",
		source: func(*harness) rukpakv1alpha1.BundleSource {
			return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit, Git: &rukpakv1alpha1.GitSource{
				Repository: gitSrv.RepoURL("charts"), Ref: rukpakv1alpha1.GitRef{Branch: "main"}, Directory: "charts/hello-world",
			}}
		},
		values: func(*harness) string { return "replicaCount: 2\n" },
		kinds:  []string{"Deployment", "Service", "ServiceAccount"},
		check:  replicas(2),
	}, {
		name: "hello-world-configmaps", chart: "hello-world",
		source: func(h *harness) rukpakv1alpha1.BundleSource {
			return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps, ConfigMaps: h.chartConfigMaps("hello-world-dir", chartFiles(h.t, "hello-world", ""))}
		},
		values: func(*harness) string { return "replicaCount: 3\n" },
		kinds:  []string{"Deployment", "Service", "ServiceAccount"},
		check:  replicas(3),
	}, {
		name: "ksm-oci", chart: "kube-state-metrics",
		source: helmOCI("kube-state-metrics"),
		kinds:  []string{"Deployment", "Service", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"},
	}, webhookOverHTTPS(httpsSrv), {
		name: "crds-oci", chart: "prometheus-operator-crds",
		source: helmOCI("prometheus-operator-crds"),
		kinds:  []string{"CustomResourceDefinition"},
		check: func(h *harness, live []*unstructured.Unstructured) {
			records, chunks := h.releaseState("crds-oci")
			if fmt.Sprint(records) != "map[1:deployed]" {
				h.t.Errorf("release records %v, want revision 1 deployed", records)
			}
			index := &corev1.Secret{}
			if err := h.get(index, namespace, "sh.helm.release.v1.crds-oci.v1"); err != nil {
				h.t.Fatal(err)
			}
			h.t.Logf("crds-oci record: %d chunks, keys %v, release %d bytes", chunks, keys(index.Data), len(index.Data["release"]))
			eventuallyWithin(h.t, chartInstallTimeout, "the chart's CRDs established", func() error {
				n := 0
				for _, o := range live {
					if o.GetKind() != "CustomResourceDefinition" {
						continue
					}
					crd := &apiextensionsv1.CustomResourceDefinition{}
					if err := h.get(crd, "", o.GetName()); err != nil {
						return err
					}
					if !established(crd) {
						return fmt.Errorf("%s is not established", crd.Name)
					}
					n++
				}
				if n != 10 {
					return fmt.Errorf("%d CRDs, want the chart's 10", n)
				}
				return nil
			})
			names := make([]string, 0, len(live))
			for _, o := range live {
				if o.GetKind() == "CustomResourceDefinition" {
					names = append(names, o.GetName())
				}
			}
			h.waitCRDStorage(names...)
		},
	}}
	// One after another, in this test's slot: parallel subtests would wait
	// for a slot until every other test of the package has started (they
	// queue last), and then the 4.4 MB of CRDs would be the package's last
	// test, its API server kept running meanwhile.
	for _, in := range installs {
		t.Run(in.name, func(t *testing.T) {
			// The harness's helpers fail the test they are given.
			sub := *h
			sub.t = t
			sub.installChart(in)
		})
	}
}

// webhookOverHTTPS installs prometheus-operator-admission-webhook the third
// way its values offer (TestIntegrationHelmAdmissionWebhookChart has
// cert-manager's; the default, hook Jobs creating the certificate, needs
// pods that run: the real-node suite): jobs off, the serving certificate in
// a Secret of the user's (tlsSecret) and its CA in the webhook
// configurations (caBundle). The chart archive comes over HTTPS.
func webhookOverHTTPS(srv *chartServer) chartInstall {
	const name, secret = "webhook-https", "webhook-tls"
	const fullname = name + "-prometheus-operator-admission-webhook"
	var pair selfsigned.Pair
	return chartInstall{
		name: name, chart: "prometheus-operator-admission-webhook",
		source: func(h *harness) rukpakv1alpha1.BundleSource {
			ch := loadTestChart(h.t, "prometheus-operator-admission-webhook")
			return srv.serve(ch.Name()+"-"+ch.Metadata.Version+".tgz", helmPackage(h.t, ch))
		},
		values: func(h *harness) string {
			var err error
			pair, err = selfsigned.New([]string{fullname + "." + name + ".svc", fullname + "." + name + ".svc.cluster.local"}, 24*time.Hour)
			if err != nil {
				h.t.Fatal(err)
			}
			if err := h.c.Create(h.t.Context(), &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: secret},
				Type:       corev1.SecretTypeTLS,
				Data:       map[string][]byte{corev1.TLSCertKey: pair.CertPEM, corev1.TLSPrivateKeyKey: pair.KeyPEM},
			}); err != nil {
				h.t.Fatal(err)
			}
			return fmt.Sprintf("jobs:\n  enabled: false\ncaBundle: %s\ntlsSecret:\n  name: %s\n", base64.StdEncoding.EncodeToString(pair.CAPEM), secret)
		},
		kinds: []string{"Deployment", "Service", "ServiceAccount", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"},
		check: func(h *harness, live []*unstructured.Unstructured) {
			vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			convertOne(h.t, live, "ValidatingWebhookConfiguration", vwc)
			mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
			convertOne(h.t, live, "MutatingWebhookConfiguration", mwc)
			var bundles [][]byte
			for _, w := range vwc.Webhooks {
				bundles = append(bundles, w.ClientConfig.CABundle)
			}
			for _, w := range mwc.Webhooks {
				bundles = append(bundles, w.ClientConfig.CABundle)
			}
			if len(bundles) < 2 {
				h.t.Errorf("%d webhooks in the chart's configurations, want at least one validating and one mutating", len(bundles))
			}
			for _, b := range bundles {
				if !bytes.Equal(b, pair.CAPEM) {
					h.t.Errorf("a webhook's caBundle is %q, want the CA of the user's certificate", b)
				}
			}
			dep := &appsv1.Deployment{}
			convertOne(h.t, live, "Deployment", dep)
			mounted := false
			for _, v := range dep.Spec.Template.Spec.Volumes {
				mounted = mounted || (v.Secret != nil && v.Secret.SecretName == secret)
			}
			if !mounted {
				h.t.Errorf("Deployment %s does not mount Secret %s: volumes %+v", dep.Name, secret, dep.Spec.Template.Spec.Volumes)
			}
		},
	}
}

// installChart installs in, checks it, and uninstalls it.
func (h *harness) installChart(in chartInstall) {
	t := h.t
	h.createNamespace(in.name)
	config := map[string]string{"installNamespace": in.name}
	var values string
	if in.values != nil {
		values = in.values(h)
		config["values"] = values
	}
	raw, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	h.createHelmBD(in.name, in.source(h), string(raw))
	eventuallyWithin(t, chartInstallTimeout, in.name+" installed", func() error {
		c := conditions.Get(h.bd(in.name).Status.Conditions, rukpakv1alpha1.TypeInstalled)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != rukpakv1alpha1.ReasonInstallationSucceeded {
			return fmt.Errorf("Installed %+v", c)
		}
		return nil
	})
	// Helm's own storage driver (`helm history`) reads the release.
	h.waitHistory(in.name, h.stockHistory, "1:deployed")

	rel := h.deployedRelease(in.name)
	want := h.renderChart(in.chart, in.name, values)
	if rel.Chart == nil || rel.Chart.Metadata == nil {
		t.Fatalf("release %s holds no chart", in.name)
	}
	if g, w := rel.Chart.Name()+" "+rel.Chart.Metadata.Version, want.Chart.Name()+" "+want.Chart.Metadata.Version; g != w {
		t.Fatalf("release %s holds chart %s, want %s", in.name, g, w)
	}
	wantObjs := manifestObjects(t, want)
	if g, w := objectNames(manifestObjects(t, rel)), objectNames(wantObjs); !slices.Equal(g, w) {
		t.Fatalf("release %s installed\n%s\nwant what the chart renders to:\n%s", in.name, strings.Join(g, "\n"), strings.Join(w, "\n"))
	}
	if g, w := hookNames(rel), hookNames(want); !slices.Equal(g, w) {
		t.Fatalf("release %s hooks %v, want %v", in.name, g, w)
	}
	for _, kind := range in.kinds {
		if !slices.ContainsFunc(wantObjs, func(o *unstructured.Unstructured) bool { return o.GetKind() == kind }) {
			t.Fatalf("%s renders no %s: %v", in.chart, kind, objectNames(wantObjs))
		}
	}
	live := make([]*unstructured.Unstructured, 0, len(wantObjs))
	for _, o := range wantObjs {
		u := h.liveObject(o, in.name)
		checkStamped(t, u, in.name, in.name)
		live = append(live, u)
	}
	t.Logf("%s: %d objects, %d chart files, installed in %s", in.name, len(live), len(rel.Chart.Templates)+len(rel.Chart.Files), time.Since(start).Round(time.Millisecond))
	if in.check != nil {
		in.check(h, live)
	}

	start = time.Now()
	if err := h.c.Delete(t.Context(), h.bd(in.name)); err != nil {
		t.Fatal(err)
	}
	eventuallyWithin(t, chartUninstallTimeout, in.name+"'s objects deleted", func() error {
		var left []string
		for _, u := range live {
			err := h.get(u.DeepCopy(), u.GetNamespace(), u.GetName())
			if err == nil {
				left = append(left, u.GetKind()+" "+u.GetName())
			} else if !apierrors.IsNotFound(err) {
				return err
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("still there: %v", left)
		}
		return nil
	})
	h.waitGone(&rukpakv1alpha1.BundleDeployment{}, "", in.name)
	if records, chunks := h.releaseState(in.name); len(records) != 0 || chunks != 0 {
		t.Errorf("after uninstall: release records %v, %d chunks", records, chunks)
	}
	t.Logf("%s: uninstalled in %s", in.name, time.Since(start).Round(time.Millisecond))
}

// deployedRelease reads the release's one revision as the provisioner
// does (a chunked record whole).
func (h *harness) deployedRelease(name string) *helmrelease.Release {
	h.t.Helper()
	m, err := release.NewManager(h.env.Config, namespace)
	if err != nil {
		h.t.Fatal(err)
	}
	hist, err := m.History(name)
	if err != nil {
		h.t.Fatal(err)
	}
	if len(hist) != 1 || hist[0].Info == nil || hist[0].Info.Status != helmrelease.StatusDeployed {
		h.t.Fatalf("release %s: %d revisions, want revision 1 deployed", name, len(hist))
	}
	return hist[0]
}

// renderChart renders the chart of the shared test data on disk as an
// install of release name in namespace name with values does, for this
// cluster's capabilities.
func (h *harness) renderChart(chart, name, values string) *helmrelease.Release {
	h.t.Helper()
	vals := map[string]any{}
	if err := yaml.Unmarshal([]byte(values), &vals); err != nil {
		h.t.Fatal(err)
	}
	ch, err := helm.LoadChart(os.DirFS(filepath.Join(helmTestdata, chart)))
	if err != nil {
		h.t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(h.env.Config)
	if err != nil {
		h.t.Fatal(err)
	}
	caps, err := helm.Capabilities(memory.NewMemCacheClient(dc), ch.CRDObjects())
	if err != nil {
		h.t.Fatal(err)
	}
	r, err := helm.Render(h.t.Context(), ch, vals, helm.RenderOptions{
		ReleaseName: name, Namespace: name, KubeVersion: &caps.KubeVersion, APIVersions: caps.APIVersions,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return r.Release
}

func manifestObjects(t *testing.T, rel *helmrelease.Release) []*unstructured.Unstructured {
	t.Helper()
	objs, err := release.DecodeManifest(rel.Manifest)
	if err != nil {
		t.Fatalf("release %s: %v", rel.Name, err)
	}
	return objs
}

// objectNames are "apiVersion Kind name", sorted.
func objectNames(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetAPIVersion()+" "+o.GetKind()+" "+o.GetName())
	}
	slices.Sort(out)
	return out
}

func hookNames(rel *helmrelease.Release) []string {
	out := make([]string, 0, len(rel.Hooks))
	for _, hk := range rel.Hooks {
		out = append(out, hk.Kind+" "+hk.Name)
	}
	slices.Sort(out)
	return out
}

// liveObject gets the live object of rendered object o of a release in
// namespace ns (namespaced objects the chart gives no namespace go there).
func (h *harness) liveObject(o *unstructured.Unstructured, ns string) *unstructured.Unstructured {
	h.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(o.GroupVersionKind())
	namespaced, err := h.c.IsObjectNamespaced(u)
	if err != nil {
		h.t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	switch {
	case !namespaced:
		ns = ""
	case o.GetNamespace() != "":
		ns = o.GetNamespace()
	}
	if err := h.get(u, ns, o.GetName()); err != nil {
		h.t.Fatalf("the chart's %s %s/%s: %v", o.GetKind(), ns, o.GetName(), err)
	}
	return u
}

// convertOne converts the only object of kind among objs into into.
func convertOne(t *testing.T, objs []*unstructured.Unstructured, kind string, into any) {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects of kind %s, want 1", len(found), kind)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(found[0].Object, into); err != nil {
		t.Fatalf("%s %s: %v", kind, found[0].GetName(), err)
	}
}
