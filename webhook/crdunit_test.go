package webhook_test

import (
	"context"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rukpak-dev/rukpak/webhook"
)

// TestCRDCheckAnswersWithoutReading: requests the configuration should
// never send, should they come, are admitted without reading anything
// (the check has no reader or lister here: a read would panic).
func TestCRDCheckAnswersWithoutReading(t *testing.T) {
	crd := func(labels map[string]string, plural string) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + ".example.com", Labels: labels},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.ClusterScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: "W"}},
		}
	}
	owned := map[string]string{"core.rukpak.io/owner-kind": "BundleDeployment", "core.rukpak.io/owner-name": "bd"}
	raw := func(c *apiextensionsv1.CustomResourceDefinition) runtime.RawExtension {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	// A scope change fails the check outright: were these checked, they
	// would be refused.
	namespaced := func(c *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
		c.Spec.Scope = apiextensionsv1.NamespaceScoped
		return c
	}
	relabelled := crd(map[string]string{"core.rukpak.io/owner-kind": "BundleDeployment", "core.rukpak.io/owner-name": "bd", "x": "y"}, "widgets")
	for _, tc := range []struct {
		name     string
		op       admissionv1.Operation
		old, new *apiextensionsv1.CustomResourceDefinition
	}{
		{"create", admissionv1.Create, nil, crd(owned, "widgets")},
		{"delete", admissionv1.Delete, crd(owned, "widgets"), nil},
		{"unowned spec change", admissionv1.Update, crd(nil, "widgets"), namespaced(crd(nil, "widgets"))},
		{"owned by something else", admissionv1.Update, crd(map[string]string{"core.rukpak.io/owner-kind": "Other"}, "widgets"), namespaced(crd(nil, "widgets"))},
		{"owned, metadata only", admissionv1.Update, crd(owned, "widgets"), relabelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: tc.op}}
			if tc.old != nil {
				req.OldObject = raw(tc.old)
			}
			if tc.new != nil {
				req.Object = raw(tc.new)
			}
			resp := (&webhook.CRDCheck{}).Handle(context.Background(), req)
			if !resp.Allowed || len(resp.Warnings) > 0 {
				t.Fatalf("allowed %v, warnings %q, result %+v; want admitted silently", resp.Allowed, resp.Warnings, resp.Result)
			}
		})
	}
}

// TestCRDCheckScopeChange: an owned CRD whose scope changes is refused with
// the preflight's message without reading any object (the API server would
// refuse it too; the webhook says why first).
func TestCRDCheckScopeChange(t *testing.T) {
	old := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", Labels: map[string]string{"core.rukpak.io/owner-kind": "BundleDeployment"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "W"}},
	}
	next := old.DeepCopy()
	next.Spec.Scope = apiextensionsv1.NamespaceScoped
	o, _ := json.Marshal(old)
	n, _ := json.Marshal(next)
	resp := (&webhook.CRDCheck{}).Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Update, OldObject: runtime.RawExtension{Raw: o}, Object: runtime.RawExtension{Raw: n}}})
	const want = "CRD upgrade preflight failed: CRD widgets.example.com: ScopeChanged: scope changed from Cluster to Namespaced"
	if resp.Allowed || resp.Result == nil || resp.Result.Message != want {
		t.Fatalf("allowed %v, result %+v; want refused with %q", resp.Allowed, resp.Result, want)
	}
}
