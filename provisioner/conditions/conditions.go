// Package conditions keeps status conditions tidy: a condition's
// LastTransitionTime only moves when its status does, so reconciles that find
// nothing new write nothing.
package conditions

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Set records a condition on conds for generation.
func Set(conds *[]metav1.Condition, generation int64, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type:               typ,
		Status:             status,
		Reason:             reason,
		Message:            truncate(message),
		ObservedGeneration: generation,
	})
}

// Is reports whether conds has typ with status.
func Is(conds []metav1.Condition, typ string, status metav1.ConditionStatus) bool {
	c := meta.FindStatusCondition(conds, typ)
	return c != nil && c.Status == status
}

// Get returns the condition of type typ, or nil.
func Get(conds []metav1.Condition, typ string) *metav1.Condition {
	return meta.FindStatusCondition(conds, typ)
}

// maxMessage stays under the API's 32768-character limit on messages.
const maxMessage = 32000

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage-3] + "..."
}
