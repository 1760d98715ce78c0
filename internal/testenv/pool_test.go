package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// TestPooledServerIsEmptiedForTheNext: what one test leaves on a pooled
// server (namespaced and cluster-scoped objects with finalizers, a CRD with
// a resource, a webhook that refuses everything, an API service whose
// backend is gone) is gone for the next test on the same server, and a
// namespace or CRD of the same name made again holds none of the old
// objects. A test that changes an object the server started with gets no
// reused server after it.
func TestPooledServerIsEmptiedForTheNext(t *testing.T) {
	ctx := context.Background()
	var first *Env
	t.Run("leave things behind", func(t *testing.T) {
		first = Pooled(t)
		c := first.Client
		must := func(err error, what string) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		must(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "left", Finalizers: []string{"test/keep"}}}), "namespace")
		must(c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "left", Finalizers: []string{"test/keep"}}}), "configmap")
		must(c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "default"}}), "configmap in default")
		must(c.Create(ctx, &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "old", Finalizers: []string{"core.rukpak.io/delete-cached-bundle"}},
			Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
				Source: rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeImage, Image: &rukpakv1alpha1.ImageSource{Ref: "example.com/b:v1"}}}}), "bundle")
		crd := gadgetCRD()
		must(c.Create(ctx, crd), "crd")
		eventuallyEstablished(t, c, crd.Name)
		g := &unstructured.Unstructured{}
		g.SetAPIVersion("pool.test/v1")
		g.SetKind("Gadget")
		g.SetName("old")
		g.SetNamespace("left")
		g.SetFinalizers([]string{"test/keep"})
		must(c.Create(ctx, g), "gadget")
		// An aggregated API whose backend is not there.
		svc := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"metadata": map[string]any{"name": "v1.gone.pool.test"},
			"spec": map[string]any{"group": "gone.pool.test", "version": "v1", "groupPriorityMinimum": int64(100), "versionPriority": int64(10),
				"insecureSkipTLSVerify": true, "service": map[string]any{"namespace": "default", "name": "gone", "port": int64(443)}},
		}}
		must(c.Create(ctx, svc), "api service")
		// Refuses every write from here on, and its backend is gone.
		must(c.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "refuse-all"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name:                    "refuse.pool.test",
				ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/refuse")},
				Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}}}},
				FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
			}},
		}), "webhook configuration")
		start := time.Now()
		for {
			err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "refused-", Namespace: "default"}})
			if err != nil && strings.Contains(err.Error(), "refuse.pool.test") {
				break
			}
			if time.Since(start) > WaitTimeout {
				t.Fatalf("a write past the refusing webhook: %v; want it refused by the webhook", err)
			}
			Poll(start)
		}
	})
	t.Run("finds none of it", func(t *testing.T) {
		env := Pooled(t)
		if env.Env != first.Env {
			t.Fatal("a second test run after the first got a new API server, not the pooled one")
		}
		c := env.Client
		for _, o := range []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "left"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "default"}},
			&rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "old"}},
			&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "gadgets.pool.test"}},
			&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "refuse-all"}},
			&unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": map[string]any{"name": "v1.gone.pool.test"}}},
		} {
			if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
				t.Errorf("%T %s: %v; want it gone", o, o.GetName(), err)
			}
		}
		// The same names again: nothing of the old objects comes back.
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "left"}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "left", Name: "old"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("configmap left/old in a new namespace of the same name: %v", err)
		}
		crd := gadgetCRD()
		if err := c.Create(ctx, crd); err != nil {
			t.Fatal(err)
		}
		eventuallyEstablished(t, c, crd.Name)
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("pool.test/v1")
		list.SetKind("GadgetList")
		// Discovery may serve the kind a moment after Established (on a
		// busy machine, seconds): until then the client cannot map it.
		var err error
		for start := time.Now(); ; Poll(start) {
			if err = c.List(ctx, list); !meta.IsNoMatchError(err) || time.Since(start) > WaitTimeout {
				break
			}
		}
		if err != nil || len(list.Items) != 0 {
			t.Errorf("gadgets of a new CRD of the same name: %d, %v; want none", len(list.Items), err)
		}
		// Changes the default namespace, which the server started with.
		ns := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKey{Name: "default"}, ns); err != nil {
			t.Fatal(err)
		}
		ns.Labels = map[string]string{"changed": "by-a-test"}
		if err := c.Update(ctx, ns); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("gets a fresh server after a change to the starting objects", func(t *testing.T) {
		env := Pooled(t)
		if env.Env == first.Env {
			t.Fatal("a server whose default namespace a test changed was reused")
		}
		ns := &corev1.Namespace{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "default"}, ns); err != nil || ns.Labels["changed"] != "" {
			t.Errorf("default namespace: labels %v, %v", ns.Labels, err)
		}
	})
}

func gadgetCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.pool.test"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "pool.test",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
}

func eventuallyEstablished(t *testing.T, c client.Client, name string) {
	t.Helper()
	start := time.Now()
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: name}, crd); err == nil {
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return
				}
			}
		}
		if time.Since(start) > WaitTimeout {
			t.Fatalf("CRD %s not Established after %s", name, WaitTimeout)
		}
		Poll(start)
	}
}
