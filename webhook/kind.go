package webhook

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// kindGuard rejects requests for any other kind than the one its handler
// decodes. Without it an AdmissionReview for, say, a ConfigMap sent to the
// Bundle path would be decoded field by field into an empty Bundle.
type kindGuard struct {
	kind schema.GroupVersionKind
	next admission.Handler
}

func (g kindGuard) Handle(ctx context.Context, req admission.Request) admission.Response {
	got := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
	if got != g.kind {
		return admission.Errored(http.StatusBadRequest,
			fmt.Errorf("this webhook admits %s, not %q", g.kind, got.String()))
	}
	return g.next.Handle(ctx, req)
}
