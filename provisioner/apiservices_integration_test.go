package provisioner_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/provisioner/health"
	"github.com/rukpak-dev/rukpak/provisioner/servingcert"
)

// apiServiceBundle is the test bundle whose Deployment serves two owned API
// services and a validating webhook.
var apiServiceBundle = webhookBundle{
	dir: "apiservice-operator-1.0.0", path: "../test/testdata/bundles/registry-v1/apiservice-operator-1.0.0",
	namespace: "apiservice-operator-system", secret: "apiservice-operator-service-cert", service: "apiservice-operator-service",
	deployment: "apiservice-operator", validating: 1,
}

var apiServiceNames = []string{"v1alpha1.apiservice.rukpak.test", "v1beta1.apiservice.rukpak.test"}

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

func apiServiceObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apiregistration.k8s.io/v1")
	u.SetKind("APIService")
	return u
}

// checkAPIServices checks the install's APIServices: served by the
// bundle's Service with OLM v0's priorities, the certificate Secret's CA
// bundle injected; and the API server's bindings.
func (h *harness) checkAPIServices(bd string, secret *corev1.Secret) {
	h.t.Helper()
	ctx := context.Background()
	wb := apiServiceBundle
	for _, name := range apiServiceNames {
		u := apiServiceObject()
		if err := h.c.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
			h.t.Fatalf("APIService: %v", err)
		}
		if owner := u.GetLabels()[rukpakv1alpha1.LabelOwnerName]; owner != bd {
			h.t.Errorf("APIService %s owned by %q, want %q", name, owner, bd)
		}
		version, group, _ := strings.Cut(name, ".")
		spec := u.Object["spec"].(map[string]interface{})
		want := map[string]interface{}{
			"group": group, "version": version, "groupPriorityMinimum": int64(2000), "versionPriority": int64(15),
			"service":  map[string]interface{}{"namespace": wb.namespace, "name": wb.service, "port": int64(9443)},
			"caBundle": base64.StdEncoding.EncodeToString(secret.Data[servingcert.CAFile]),
		}
		for k, v := range want {
			if fmt.Sprint(spec[k]) != fmt.Sprint(v) {
				h.t.Errorf("APIService %s: spec.%s = %v, want %v", name, k, spec[k], v)
			}
		}
	}
	crb := &rbacv1.ClusterRoleBinding{}
	if err := h.c.Get(ctx, client.ObjectKey{Name: wb.service + "-system:auth-delegator"}, crb); err != nil {
		h.t.Errorf("auth-delegator ClusterRoleBinding: %v", err)
	} else if crb.RoleRef.Name != "system:auth-delegator" || len(crb.Subjects) != 1 || crb.Subjects[0].Name != "apiservice-operator" || crb.Subjects[0].Namespace != wb.namespace {
		h.t.Errorf("auth-delegator ClusterRoleBinding: roleRef %v, subjects %v", crb.RoleRef, crb.Subjects)
	}
	rb := &rbacv1.RoleBinding{}
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: wb.service + "-auth-reader"}, rb); err != nil {
		h.t.Errorf("auth-reader RoleBinding: %v", err)
	} else if rb.RoleRef.Name != "extension-apiserver-authentication-reader" || len(rb.Subjects) != 1 || rb.Subjects[0].Name != "apiservice-operator" {
		h.t.Errorf("auth-reader RoleBinding: roleRef %v, subjects %v", rb.RoleRef, rb.Subjects)
	}
}

// TestIntegrationAPIServices installs a bundle with owned API services
// and a webhook served by one Deployment: one Service, one certificate
// Secret mounted for both, the APIServices with its CA bundle; Healthy
// names each APIService with the reason of its Available condition (no
// server runs in envtest); uninstall deletes the APIServices before the
// workload serving them. An APIService that exists outside any release
// is never taken over.
func TestIntegrationAPIServices(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	wb := apiServiceBundle
	name := "apis"
	h.installWebhookBundle(name, wb)
	secret := h.checkWebhooks(name, wb)
	h.checkAPIServices(name, secret)

	// Healthy shows each APIService's Available condition, as the
	// aggregator reports it.
	eventually(t, "Healthy to name the APIServices", func() error {
		c := conditions.Get(h.bd(name).Status.Conditions, rukpakv1alpha1.TypeHealthy)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != rukpakv1alpha1.ReasonUnhealthy {
			return fmt.Errorf("condition %+v", c)
		}
		for _, n := range apiServiceNames {
			u := apiServiceObject()
			if err := h.c.Get(ctx, client.ObjectKey{Name: n}, u); err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			if !slices.ContainsFunc(conds, func(c interface{}) bool {
				m, _ := c.(map[string]interface{})
				return m["type"] == "Available" && m["status"] == "False" && m["reason"] != ""
			}) {
				return fmt.Errorf("APIService %s: no Available=False condition with a reason yet: %v", n, conds)
			}
			res := health.Check(u)
			if res.Ready {
				return fmt.Errorf("APIService %s ready without a server", n)
			}
			if want := "APIService " + n + ": " + res.String(); !strings.Contains(c.Message, want) {
				return fmt.Errorf("Healthy message %q does not contain %q", c.Message, want)
			}
		}
		return nil
	})

	// Uninstall: the APIServices go before the Deployment and Service
	// serving them (resource versions order the deletions).
	dyn, err := dynamic.NewForConfig(h.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	sel := metav1.ListOptions{LabelSelector: rukpakv1alpha1.LabelOwnerName + "=" + name}
	var watches []watch.Interface
	for _, r := range []struct {
		gvr schema.GroupVersionResource
		ns  string
	}{
		{apiServiceGVR, ""},
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, wb.namespace},
		{schema.GroupVersionResource{Version: "v1", Resource: "services"}, wb.namespace},
	} {
		wi, err := dyn.Resource(r.gvr).Namespace(r.ns).Watch(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		defer wi.Stop()
		watches = append(watches, wi)
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
	apis := deletedVersions(t, watches[0], len(apiServiceNames))
	workload := append(deletedVersions(t, watches[1], 1), deletedVersions(t, watches[2], 1)...)
	if last, first := slices.Max(apis), slices.Min(workload); last > first {
		t.Fatalf("an APIService was deleted (resource version %d) after the workload serving it (%d)", last, first)
	}
	for _, n := range apiServiceNames {
		if err := h.c.Get(ctx, client.ObjectKey{Name: n}, apiServiceObject()); !apierrors.IsNotFound(err) {
			t.Errorf("APIService %s after uninstall: %v", n, err)
		}
	}

	// An APIService of the same group and version that no release owns
	// (another operator's, installed by hand) is not taken over.
	other := apiServiceObject()
	other.SetName(apiServiceNames[0])
	other.Object["spec"] = map[string]interface{}{
		"group": "apiservice.rukpak.test", "version": "v1alpha1", "groupPriorityMinimum": int64(100), "versionPriority": int64(1),
		"service": map[string]interface{}{"namespace": "default", "name": "someone-else"},
	}
	if err := h.c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	// (Another install namespace: envtest never finishes deleting one.)
	again := wb
	again.config = `{"installNamespace":"apis-again"}`
	h.createWebhookBundle("apis-again", again)
	h.waitBDExact("apis-again", rukpakv1alpha1.TypeInstalled, metav1.ConditionFalse, rukpakv1alpha1.ReasonInstallFailed,
		`installing release "apis-again": APIService `+apiServiceNames[0]+" exists and is not managed by this release ("+namespace+"/apis-again): delete it or remove it from the bundle")
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(other), other); err != nil {
		t.Fatal(err)
	}
	if svc, _, _ := unstructured.NestedString(other.Object, "spec", "service", "name"); svc != "someone-else" || other.GetLabels()[rukpakv1alpha1.LabelOwnerName] != "" {
		t.Fatalf("the other APIService was changed: service %q, labels %v", svc, other.GetLabels())
	}
}

// TestIntegrationAPIServiceCertificateRotation renews the certificate of a
// Deployment serving API services: the renewed CA bundle reaches every
// APIService.
func TestIntegrationAPIServiceCertificateRotation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.kill()
	// Renewed 10 s after each issue.
	h.certValidity, h.certRenewBefore = 40*time.Second, 30*time.Second
	h.start()
	wb := apiServiceBundle
	name := "apis-rotation"
	h.installWebhookBundle(name, wb)
	first := &corev1.Secret{}
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: wb.namespace, Name: wb.secret}, first); err != nil {
		t.Fatal(err)
	}
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
	want := base64.StdEncoding.EncodeToString(second.Data[servingcert.CAFile])
	eventually(t, "the renewed CA bundle in every APIService", func() error {
		for _, n := range apiServiceNames {
			u := apiServiceObject()
			if err := h.c.Get(context.Background(), client.ObjectKey{Name: n}, u); err != nil {
				return err
			}
			if got, _, _ := unstructured.NestedString(u.Object, "spec", "caBundle"); got != want {
				return fmt.Errorf("APIService %s has another CA bundle", n)
			}
		}
		return nil
	})
	if n := strings.Count(string(second.Data[servingcert.CAFile]), "BEGIN CERTIFICATE"); n != 2 {
		t.Fatalf("renewed CA bundle holds %d certificates, want 2 (new and previous CA)", n)
	}
}
