package release

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// servedFirst splits objs into the objects that make the API server call a
// workload — admission webhook configurations and APIServices — and the
// rest. Deletions go in that order: deleting a webhook's Deployment or
// Service first would leave the API server calling nothing, and a failing
// webhook refuses every request it matches until its configuration goes.
func servedFirst(objs []*unstructured.Unstructured) (first, rest []*unstructured.Unstructured) {
	for _, o := range objs {
		gk := o.GroupVersionKind().GroupKind()
		switch {
		case gk.Group == "admissionregistration.k8s.io" && (gk.Kind == "ValidatingWebhookConfiguration" || gk.Kind == "MutatingWebhookConfiguration"),
			gk.Group == "apiregistration.k8s.io" && gk.Kind == "APIService":
			first = append(first, o)
		default:
			rest = append(rest, o)
		}
	}
	return first, rest
}
