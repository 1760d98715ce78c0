package release

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestServedFirst(t *testing.T) {
	obj := func(apiVersion, kind, name string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion(apiVersion)
		o.SetKind(kind)
		o.SetName(name)
		return o
	}
	objs := []*unstructured.Unstructured{
		obj("apps/v1", "Deployment", "op"),
		obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "v"),
		obj("v1", "Service", "op-service"),
		obj("apiregistration.k8s.io/v1", "APIService", "v1.example.com"),
		obj("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "m"),
		obj("example.com/v1", "ValidatingWebhookConfiguration", "lookalike"),
	}
	names := func(objs []*unstructured.Unstructured) (out []string) {
		for _, o := range objs {
			out = append(out, o.GetName())
		}
		return out
	}
	first, rest := servedFirst(objs)
	if got, want := names(first), []string{"v", "v1.example.com", "m"}; !reflect.DeepEqual(got, want) {
		t.Errorf("first %q, want %q", got, want)
	}
	if got, want := names(rest), []string{"op", "op-service", "lookalike"}; !reflect.DeepEqual(got, want) {
		t.Errorf("rest %q, want %q", got, want)
	}
}
