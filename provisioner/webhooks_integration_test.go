package provisioner_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testcertmanager"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/provisioner/servingcert"
)

// webhookBundle is a real registry+v1 bundle with webhooks and what its
// install must hold.
type webhookBundle struct {
	dir, config, namespace string
	path                   string // the bundle's directory when not dir of the shared test data
	secret, service        string // the serving certificate's Secret and the webhooks' Service
	deployment             string
	validating, mutating   int
	converted              int // CRDs whose conversion calls the webhook
}

var webhookBundles = []webhookBundle{
	{dir: "cert-manager-1.6.2", namespace: "cert-manager-system", secret: "cert-manager-webhook-service-cert", service: "cert-manager-webhook-service",
		deployment: "cert-manager-webhook", validating: 1, mutating: 1, converted: 6},
	{dir: "opentelemetry-operator-0.158.0", namespace: "opentelemetry-operator-system", secret: "opentelemetry-operator-webhook-service-cert",
		service: "opentelemetry-operator-webhook-service", deployment: "opentelemetry-operator-webhook", validating: 8, mutating: 5, converted: 1},
	// OwnNamespace: the webhooks see the install namespace only.
	{dir: "infinispan-2.5.14", config: `{"installNamespace":"infinispan","watchNamespaces":["infinispan"]}`, namespace: "infinispan",
		secret: "infinispan-operator-controller-manager-service-cert", service: "infinispan-operator-controller-manager-service",
		deployment: "infinispan-operator-controller-manager", validating: 5, mutating: 4},
	{dir: "marin3r-0.13.1", namespace: "marin3r-system", secret: "marin3r-controller-webhook-service-cert", service: "marin3r-controller-webhook-service",
		deployment: "marin3r-controller-webhook", validating: 2, mutating: 1},
}

func (h *harness) installWebhookBundle(name string, wb webhookBundle) *rukpakv1alpha1.BundleDeployment {
	h.t.Helper()
	h.createWebhookBundle(name, wb)
	return h.waitBD(name, rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
}

// createWebhookBundle creates a BundleDeployment of a webhook bundle.
func (h *harness) createWebhookBundle(name string, wb webhookBundle) {
	h.t.Helper()
	dir := wb.path
	if dir == "" {
		dir = filepath.Join("../../shared/testdata/registry-v1", wb.dir)
	}
	if _, err := os.Stat(dir); err != nil {
		h.t.Skipf("shared test data not available: %v", err)
	}
	ref := h.reg.Ref("webhooks:" + wb.dir)
	h.reg.MustPush(h.t, ref, testregistry.Image(h.t, testregistry.LayerFromDir(h.t, dir, "")))
	bd := newBD(name, rukpakv1alpha1.BundleSource{
		Type:  rukpakv1alpha1.SourceTypeImage,
		Image: &rukpakv1alpha1.ImageSource{Ref: ref, CertificateData: string(h.reg.CAPEM)},
	})
	bd.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	bd.Spec.Template.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	if wb.config != "" {
		bd.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(wb.config)}
	}
	if err := h.c.Create(context.Background(), bd); err != nil {
		h.t.Fatal(err)
	}
}

// checkWebhooks checks that a webhook bundle's install holds its Service, a
// valid serving certificate and that certificate's CA bundle in every
// webhook configuration and converted CRD; it returns the Secret.
func (h *harness) checkWebhooks(bd string, wb webhookBundle) *corev1.Secret {
	h.t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{}
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: wb.namespace, Name: wb.secret}, secret); err != nil {
		h.t.Fatalf("certificate Secret: %v", err)
	}
	names := servingcert.ServiceDNSNames(wb.service, wb.namespace)
	if d := servingcert.Decide(time.Now(), secret.Data, names, 0); d.Renew {
		h.t.Fatalf("certificate Secret %s does not hold a valid certificate for %v: %s", wb.secret, names, d.Reason)
	}
	ca := secret.Data[servingcert.CAFile]
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: wb.namespace, Name: wb.service}, &corev1.Service{}); err != nil {
		h.t.Errorf("webhook Service: %v", err)
	}
	owned := client.MatchingLabels{rukpakv1alpha1.LabelOwnerName: bd}
	checkHooks := func(kind string, n int, hooks [][]byte, selectors []*metav1.LabelSelector) {
		if len(hooks) != n {
			h.t.Errorf("%d webhooks in %ss, want %d", len(hooks), kind, n)
		}
		for i, got := range hooks {
			if string(got) != string(ca) {
				h.t.Errorf("%s webhook %d: caBundle is not the certificate Secret's CA bundle", kind, i)
			}
			sel := selectors[i]
			if sel == nil || !slices.ContainsFunc(sel.MatchExpressions, func(e metav1.LabelSelectorRequirement) bool {
				return e.Key == corev1.LabelMetadataName && e.Operator == metav1.LabelSelectorOpNotIn && slices.Equal(e.Values, []string{namespace})
			}) {
				h.t.Errorf("%s webhook %d: namespaceSelector %v does not leave out %s", kind, i, sel, namespace)
			}
			if wb.config != "" && !slices.ContainsFunc(sel.MatchExpressions, func(e metav1.LabelSelectorRequirement) bool {
				return e.Operator == metav1.LabelSelectorOpIn && slices.Equal(e.Values, []string{wb.namespace})
			}) {
				h.t.Errorf("%s webhook %d: namespaceSelector %v does not select only the watched namespace", kind, i, sel)
			}
		}
	}
	vs := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	ms := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	if err := h.c.List(ctx, vs, owned); err != nil {
		h.t.Fatal(err)
	}
	if err := h.c.List(ctx, ms, owned); err != nil {
		h.t.Fatal(err)
	}
	var bundles [][]byte
	var selectors []*metav1.LabelSelector
	for _, v := range vs.Items {
		for _, w := range v.Webhooks {
			bundles, selectors = append(bundles, w.ClientConfig.CABundle), append(selectors, w.NamespaceSelector)
		}
	}
	checkHooks("ValidatingWebhookConfiguration", wb.validating, bundles, selectors)
	bundles, selectors = nil, nil
	for _, m := range ms.Items {
		for _, w := range m.Webhooks {
			bundles, selectors = append(bundles, w.ClientConfig.CABundle), append(selectors, w.NamespaceSelector)
		}
	}
	checkHooks("MutatingWebhookConfiguration", wb.mutating, bundles, selectors)

	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := h.c.List(ctx, crds, owned); err != nil {
		h.t.Fatal(err)
	}
	converted := 0
	for _, crd := range crds.Items {
		if c := crd.Spec.Conversion; c != nil && c.Strategy == apiextensionsv1.WebhookConverter {
			converted++
			if string(c.Webhook.ClientConfig.CABundle) != string(ca) {
				h.t.Errorf("CRD %s: conversion caBundle is not the certificate Secret's CA bundle", crd.Name)
			}
		}
	}
	if converted != wb.converted {
		h.t.Errorf("%d CRDs convert through the webhook, want %d", converted, wb.converted)
	}

	dep := &appsv1.Deployment{}
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: wb.namespace, Name: wb.deployment}, dep); err != nil {
		h.t.Fatal(err)
	}
	mounted := 0
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == wb.secret {
			mounted++
		}
	}
	if mounted != 2 {
		h.t.Errorf("Deployment %s mounts Secret %s in %d volumes, want 2 (webhook-cert, apiservice-cert)", wb.deployment, wb.secret, mounted)
	}
	return secret
}

// releaseVersion is the newest revision of release name.
func (h *harness) releaseVersion(name string) int {
	h.t.Helper()
	list := &corev1.SecretList{}
	if err := h.c.List(context.Background(), list, client.InNamespace(namespace), client.MatchingLabels{"owner": "helm", "name": name}); err != nil {
		h.t.Fatal(err)
	}
	newest := 0
	for _, s := range list.Items {
		if v, err := strconv.Atoi(s.Labels["version"]); err == nil && v > newest {
			newest = v
		}
	}
	return newest
}

// TestIntegrationWebhookBundles installs every real bundle with webhooks
// and checks their webhook objects, that reconciles write nothing while no
// certificate is due, and that uninstalling deletes the webhook
// configurations before the workload serving them.
func TestIntegrationWebhookBundles(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	// opentelemetry-operator ships a PrometheusRule: its CRD comes from the
	// Prometheus Operator's bundle, as a cluster admin would install it.
	crdFile := "../../shared/testdata/registry-v1/prometheus-0.47.0/manifests/prometheusrules.monitoring.coreos.com.crd.yaml"
	data, err := os.ReadFile(crdFile)
	if err != nil {
		t.Skipf("shared test data not available: %v", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the PrometheusRule CRD to be established", func() error {
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("not established")
	})
	for _, wb := range webhookBundles {
		name := strings.Split(wb.dir, "-")[0] + "-webhooks"
		t.Run(wb.dir, func(t *testing.T) {
			h.t = t
			h.installWebhookBundle(name, wb)
			secret := h.checkWebhooks(name, wb)

			// A reconcile with nothing due writes nothing: no new release
			// revision, the same certificate.
			version := h.releaseVersion(name)
			requested := "check-" + wb.dir
			h.updateBD(name, func(bd *rukpakv1alpha1.BundleDeployment) {
				if bd.Annotations == nil {
					bd.Annotations = map[string]string{}
				}
				bd.Annotations[rukpakv1alpha1.AnnotationReconcileRequestedAt] = requested
			})
			eventually(t, "the requested reconcile", func() error {
				if got := h.bd(name).Status.LastHandledReconcileAt; got != requested {
					return fmt.Errorf("last handled reconcile %q", got)
				}
				return nil
			})
			again := &corev1.Secret{}
			if err := h.c.Get(ctx, client.ObjectKeyFromObject(secret), again); err != nil {
				t.Fatal(err)
			}
			if again.ResourceVersion != secret.ResourceVersion {
				t.Errorf("certificate Secret rewritten by a reconcile with nothing due")
			}
			if v := h.releaseVersion(name); v != version {
				t.Errorf("release revision %d after a reconcile with nothing due, was %d", v, version)
			}
		})
	}
	h.t = t

	// Uninstall: every webhook configuration is gone before the webhook's
	// Deployment and Service go (resource versions order the deletions).
	wb := webhookBundles[3]
	name := "marin3r-webhooks"
	var cs *kubernetes.Clientset
	cs, err = kubernetes.NewForConfig(h.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	sel := metav1.ListOptions{LabelSelector: rukpakv1alpha1.LabelOwnerName + "=" + name}
	var watches []watch.Interface
	for _, w := range []func() (watch.Interface, error){
		func() (watch.Interface, error) {
			return cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Watch(ctx, sel)
		},
		func() (watch.Interface, error) {
			return cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Watch(ctx, sel)
		},
		func() (watch.Interface, error) { return cs.AppsV1().Deployments(wb.namespace).Watch(ctx, sel) },
		func() (watch.Interface, error) { return cs.CoreV1().Services(wb.namespace).Watch(ctx, sel) },
	} {
		wi, err := w()
		if err != nil {
			t.Fatal(err)
		}
		defer wi.Stop()
		watches = append(watches, wi)
	}
	deps, svcs := &appsv1.DeploymentList{}, &corev1.ServiceList{}
	if err := h.c.List(ctx, deps, client.InNamespace(wb.namespace), client.MatchingLabels{rukpakv1alpha1.LabelOwnerName: name}); err != nil {
		t.Fatal(err)
	}
	if err := h.c.List(ctx, svcs, client.InNamespace(wb.namespace), client.MatchingLabels{rukpakv1alpha1.LabelOwnerName: name}); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(ctx, h.bd(name)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the uninstall", func() error {
		err := h.c.Get(ctx, client.ObjectKey{Name: name}, &rukpakv1alpha1.BundleDeployment{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %w", err)
	})
	hooks := append(deletedVersions(t, watches[0], wb.validating), deletedVersions(t, watches[1], wb.mutating)...)
	workload := append(deletedVersions(t, watches[2], len(deps.Items)), deletedVersions(t, watches[3], len(svcs.Items))...)
	if last, first := slices.Max(hooks), slices.Min(workload); last > first {
		t.Fatalf("a webhook configuration was deleted (resource version %d) after the workload serving it (%d)", last, first)
	}
}

// TestIntegrationWebhookCertificateRotation renews a certificate near
// expiry: a new certificate in the Secret, its CA and the previous one in
// every CA bundle, so the previous certificate stays trusted.
func TestIntegrationWebhookCertificateRotation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.kill()
	// Renewed 10 s after each issue.
	h.certValidity, h.certRenewBefore = 40*time.Second, 30*time.Second
	h.start()
	wb := webhookBundles[3]
	name := "rotation"
	h.installWebhookBundle(name, wb)
	first := h.checkWebhooks(name, wb)
	version := h.releaseVersion(name)
	var second *corev1.Secret
	eventually(t, "the certificate to be renewed", func() error {
		s := &corev1.Secret{}
		if err := h.c.Get(context.Background(), client.ObjectKeyFromObject(first), s); err != nil {
			return err
		}
		if string(s.Data[servingcert.CertFile]) == string(first.Data[servingcert.CertFile]) {
			return fmt.Errorf("same certificate")
		}
		second = s
		return nil
	})
	// The CA bundles follow once the release applies the new Secret.
	eventually(t, "the new CA bundle to be injected", func() error {
		v := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
		if err := h.c.List(context.Background(), v, client.MatchingLabels{rukpakv1alpha1.LabelOwnerName: name}); err != nil {
			return err
		}
		for _, c := range v.Items {
			for _, w := range c.Webhooks {
				if string(w.ClientConfig.CABundle) != string(second.Data[servingcert.CAFile]) {
					return fmt.Errorf("webhook %s has another CA bundle", w.Name)
				}
			}
		}
		return nil
	})
	h.checkWebhooks(name, wb)
	if v := h.releaseVersion(name); v <= version {
		t.Errorf("release revision %d after a renewal, was %d", v, version)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(second.Data[servingcert.CAFile]) {
		t.Fatal("renewed CA bundle is not PEM")
	}
	if n := strings.Count(string(second.Data[servingcert.CAFile]), "BEGIN CERTIFICATE"); n != 2 {
		t.Fatalf("renewed CA bundle holds %d certificates, want 2 (new and previous CA)", n)
	}
	for i, s := range []*corev1.Secret{first, second} {
		block, _ := pem.Decode(s.Data[servingcert.CertFile])
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: servingcert.ServiceDNSNames(wb.service, wb.namespace)[0]}); err != nil {
			t.Errorf("certificate %d is not trusted by the renewed CA bundle: %v", i, err)
		}
	}
}

// A blocker operator's webhook matches Secrets and ConfigMaps everywhere
// with failurePolicy Fail and nothing serving it: the provisioner still
// records other releases (Secrets in its own namespace), installs other
// BundleDeployments, and uninstalls the blocker.
func TestIntegrationFailingWebhookDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	src := h.pushBundle("blocker", map[string]string{
		"metadata/annotations.yaml": "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n" +
			"  operators.operatorframework.io.bundle.package.v1: blocker\n  operators.operatorframework.io.bundle.channels.v1: stable\n",
		"manifests/blocker.clusterserviceversion.yaml": blockerCSV,
	})
	blocker := newBD("blocker", src)
	blocker.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	blocker.Spec.Template.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	if err := h.c.Create(ctx, blocker); err != nil {
		t.Fatal(err)
	}
	h.waitBD("blocker", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")

	// The webhook is in force, and fails.
	err := h.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "probe"}})
	if err == nil || !strings.Contains(err.Error(), `failed calling webhook "deny.blocker.example.com"`) {
		t.Fatalf("creating a Secret the failing webhook matches: %v, want a webhook failure", err)
	}

	other := newBD("other", h.pushBundle("other", map[string]string{
		"manifests/role.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: other-reader\nrules: []\n",
	}))
	if err := h.c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	h.waitBD("other", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	if v := h.releaseVersion("other"); v != 1 {
		t.Fatalf("release revision of the other install %d, want 1", v)
	}

	// The webhook configuration goes first, so deleting the blocker's own
	// Secret is not refused by its webhook.
	if err := h.c.Delete(ctx, h.bd("blocker")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the blocker's uninstall", func() error {
		err := h.c.Get(ctx, client.ObjectKey{Name: "blocker"}, &rukpakv1alpha1.BundleDeployment{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %w", err)
	})
	if err := h.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "probe"}}); err != nil {
		t.Fatalf("creating a Secret after the blocker's uninstall: %v", err)
	}
}

const blockerCSV = `apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: blocker.v1.0.0
spec:
  installModes:
  - {type: AllNamespaces, supported: true}
  install:
    strategy: deployment
    spec:
      deployments:
      - name: blocker
        spec:
          selector: {matchLabels: {app: blocker}}
          template:
            metadata: {labels: {app: blocker}}
            spec:
              containers: [{name: blocker, image: example.com/blocker:v1}]
  webhookdefinitions:
  - type: ValidatingAdmissionWebhook
    generateName: deny.blocker.example.com
    deploymentName: blocker
    containerPort: 443
    targetPort: 9443
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Fail
    webhookPath: /validate
    rules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE, UPDATE, DELETE]
      resources: [secrets, configmaps]
`

// TestIntegrationWebhookCertManager installs a bundle with webhooks with
// spec.config.certificateProvider cert-manager against a running
// cert-manager: its Certificate fills the Secret the operator mounts, its
// CA injector the CA bundles, and the provisioner leaves the injected
// caBundle alone (no drift correction, no new release revision).
func TestIntegrationWebhookCertManager(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	user, err := h.env.Env.AddUser(envtest.User{Name: "cert-manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kcfg, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, kcfg, 0o600); err != nil {
		t.Fatal(err)
	}
	testcertmanager.Start(t, testenv.Kubectl(t), kubeconfig)

	wb := webhookBundles[3]
	wb.config = `{"certificateProvider":"cert-manager"}`
	name := "marin3r-cert-manager"
	h.installWebhookBundle(name, wb)
	ctx := context.Background()
	secret := &corev1.Secret{}
	eventually(t, "cert-manager's certificate and CA injection", func() error {
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: wb.namespace, Name: wb.secret}, secret); err != nil {
			return err
		}
		vs := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
		if err := h.c.List(ctx, vs, client.MatchingLabels{rukpakv1alpha1.LabelOwnerName: name}); err != nil {
			return err
		}
		if len(vs.Items) != wb.validating {
			return fmt.Errorf("%d validating webhook configurations", len(vs.Items))
		}
		for _, v := range vs.Items {
			if got := v.Annotations["cert-manager.io/inject-ca-from"]; got != wb.namespace+"/"+wb.secret {
				t.Fatalf("%s: cert-manager.io/inject-ca-from %q", v.Name, got)
			}
			for _, w := range v.Webhooks {
				if len(w.ClientConfig.CABundle) == 0 || string(w.ClientConfig.CABundle) != string(secret.Data["ca.crt"]) {
					return fmt.Errorf("%s: caBundle is not the Secret's ca.crt yet", w.Name)
				}
			}
		}
		return nil
	})
	names := servingcert.ServiceDNSNames(wb.service, wb.namespace)
	block, _ := pem.Decode(secret.Data["tls.crt"])
	if block == nil {
		t.Fatal("cert-manager's Secret holds no certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cert.DNSNames, names) {
		t.Fatalf("certificate for %v, want %v", cert.DNSNames, names)
	}

	// The injected caBundle is cert-manager's field: a reconcile changes
	// nothing.
	version := h.releaseVersion(name)
	h.updateBD(name, func(bd *rukpakv1alpha1.BundleDeployment) {
		if bd.Annotations == nil {
			bd.Annotations = map[string]string{}
		}
		bd.Annotations[rukpakv1alpha1.AnnotationReconcileRequestedAt] = "after-injection"
	})
	eventually(t, "the requested reconcile", func() error {
		if got := h.bd(name).Status.LastHandledReconcileAt; got != "after-injection" {
			return fmt.Errorf("last handled reconcile %q", got)
		}
		return nil
	})
	h.waitBD(name, rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	if v := h.releaseVersion(name); v != version {
		t.Errorf("release revision %d after a reconcile, was %d", v, version)
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := h.c.Get(ctx, client.ObjectKey{Name: "envoyconfig.marin3r.3scale.net-v1alpha1"}, v); err != nil {
		t.Fatal(err)
	}
	if string(v.Webhooks[0].ClientConfig.CABundle) != string(secret.Data["ca.crt"]) {
		t.Fatal("the provisioner removed the caBundle cert-manager injected")
	}
}

// A pivot to a version without webhooks deletes the webhook configuration
// before the objects it matches: the blocker's webhook refuses deleting
// Secrets (nothing serves it), so the pivot succeeds only if the
// configuration goes before the certificate Secret.
func TestIntegrationPivotDroppingWebhooks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	annotations := "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n" +
		"  operators.operatorframework.io.bundle.package.v1: blocker\n  operators.operatorframework.io.bundle.channels.v1: stable\n"
	v1 := h.pushBundle("blocker-v1", map[string]string{
		"metadata/annotations.yaml":                    annotations,
		"manifests/blocker.clusterserviceversion.yaml": blockerCSV,
	})
	withoutWebhooks, _, ok := strings.Cut(blockerCSV, "  webhookdefinitions:\n")
	if !ok {
		t.Fatal("blockerCSV has no webhookdefinitions")
	}
	v2 := h.pushBundle("blocker-v2", map[string]string{
		"metadata/annotations.yaml":                    annotations,
		"manifests/blocker.clusterserviceversion.yaml": strings.Replace(withoutWebhooks, "blocker.v1.0.0", "blocker.v2.0.0", 1),
	})
	bd := newBD("pivot", v1)
	bd.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	bd.Spec.Template.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	if err := h.c.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}
	first := h.waitBD("pivot", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	secret := client.ObjectKey{Namespace: "blocker-system", Name: "blocker-service-cert"}
	if err := h.c.Get(ctx, secret, &corev1.Secret{}); err != nil {
		t.Fatalf("certificate Secret of v1: %v", err)
	}
	installed := h.releaseVersion("pivot")
	t.Logf("installed at revision %d", installed)

	h.updateBD("pivot", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source = v2 })
	eventually(t, "the pivot to v2", func() error {
		bd := h.bd("pivot")
		if bd.Status.ActiveBundle == first.Status.ActiveBundle {
			return fmt.Errorf("active bundle still %s", bd.Status.ActiveBundle)
		}
		if err := h.c.Get(ctx, secret, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("certificate Secret of v1: %w", err)
		}
		return nil
	})
	h.waitBD("pivot", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")
	err := h.c.Get(ctx, client.ObjectKey{Name: "deny.blocker.example.com"}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("the webhook configuration v2 dropped: %v", err)
	}
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "blocker-system", Name: "blocker"}, &appsv1.Deployment{}); err != nil {
		t.Fatalf("the operator's Deployment after the pivot: %v", err)
	}
	// One revision for the pivot: none failed on a refused deletion.
	if v := h.releaseVersion("pivot"); v != installed+1 {
		t.Fatalf("release revision %d after the pivot from revision %d, want %d", v, installed, installed+1)
	}
}

// deletedVersions waits for want deletions on wi and returns their
// resource versions, which order deletions across resources.
func deletedVersions(t *testing.T, wi watch.Interface, want int) []int {
	t.Helper()
	var rvs []int
	for len(rvs) < want {
		select {
		case ev := <-wi.ResultChan():
			if ev.Type != watch.Deleted {
				continue
			}
			o, ok := ev.Object.(metav1.Object)
			if !ok {
				t.Fatalf("watch event %T", ev.Object)
			}
			rv, err := strconv.Atoi(o.GetResourceVersion())
			if err != nil {
				t.Fatal(err)
			}
			rvs = append(rvs, rv)
		case <-time.After(testenv.WaitTimeout):
			t.Fatalf("waited %s for the next deletion: %d of %d deletions seen", testenv.WaitTimeout, len(rvs), want)
		}
	}
	return rvs
}
