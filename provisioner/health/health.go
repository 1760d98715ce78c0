// Package health judges whether an installed object is ready by the
// Kubernetes status conventions, through kstatus (Flux's maintained fork of
// sigs.k8s.io/cli-utils): built-in workloads by their rollout status, and any
// custom resource by its observedGeneration and its Ready, Reconciling and
// Stalled conditions. A kind with no readiness notion is ready once it
// exists.
package health

import (
	"strings"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Result is the judgement of one object. Reason and Message are empty when
// Ready; they come from the object's own status otherwise, so they are
// bounded (maxMessage).
type Result struct {
	Ready bool
	// Reason is a CamelCase word: the object's own condition reason where
	// it gave one (Ready=False, Stalled=True), else kstatus's.
	Reason  string
	Message string
}

// String is "Reason: Message", or whichever of them is set.
func (r Result) String() string {
	switch {
	case r.Reason == "":
		return r.Message
	case r.Message == "":
		return r.Reason
	}
	return r.Reason + ": " + r.Message
}

// maxMessage bounds what one object's status contributes to a condition
// message: a custom resource's author chooses it.
const maxMessage = 512

// Check judges u, a live object as read from the API server.
func Check(u *unstructured.Unstructured) Result {
	res, err := status.Compute(u)
	if err != nil {
		// Malformed status (conditions that are not a list, say): the
		// object's author broke the conventions, which is worth showing.
		return notReady("StatusUnreadable", err.Error())
	}
	if res.Status != status.CurrentStatus {
		reason := string(res.Status)
		for _, c := range res.Conditions {
			if c.Reason != "" {
				reason = c.Reason
				break
			}
		}
		return notReady(reason, res.Message)
	}
	// kstatus has no rule for APIServices and finds no Ready condition on
	// them: an aggregated API is ready when the aggregator says Available.
	if u.GroupVersionKind().GroupKind().String() == "APIService.apiregistration.k8s.io" {
		if c := condition(u, "Available"); c["status"] != "True" {
			reason, _ := c["reason"].(string)
			msg, _ := c["message"].(string)
			if reason == "" {
				reason = "NotAvailable"
			}
			return notReady(reason, msg)
		}
	}
	return Result{Ready: true}
}

func notReady(reason, msg string) Result {
	return Result{Reason: bound(reason), Message: bound(msg)}
}

func bound(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return strings.ToValidUTF8(s[:maxMessage-3], "") + "..."
}

// condition returns u's status condition of type typ (nil if none).
func condition(u *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// statusLess are built-in kinds without a status, for which kstatus has no
// rule: Check finds any object of them ready, so one that exists needs no
// reading to be judged. Kinds with a status (workloads, Services, CRDs,
// Namespaces, PodDisruptionBudgets, any custom resource) are not here.
var statusLess = map[schema.GroupKind]bool{
	{Kind: "ConfigMap"}:      true,
	{Kind: "Secret"}:         true,
	{Kind: "ServiceAccount"}: true,
	{Kind: "LimitRange"}:     true,
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}:                              true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                       true,
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:                       true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:   true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                             true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                 true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                              true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                    true,
}

// StatusLess reports whether objects of gk have no status: any that
// exists is ready (Check), so a write's answer that it exists is its
// health.
func StatusLess(gk schema.GroupKind) bool { return statusLess[gk] }

// ReadsSpec reports whether Check reads more of an object of gk than its
// metadata and status: kstatus's rules for built-in workloads and Services
// compare their status with their spec (replicas, update strategy,
// completions, type). Custom resources, CRDs and APIServices are judged
// from metadata and status alone.
func ReadsSpec(gk schema.GroupKind) bool {
	switch gk.Group {
	case "":
		return gk.Kind == "Service" || gk.Kind == "Pod" || gk.Kind == "PersistentVolumeClaim"
	case "apps", "extensions", "batch", "policy":
		return true
	}
	return false
}
