// Package statuspatch writes an object's status as a JSON merge patch of
// the status alone. controller-runtime's MergeFrom marshals the whole
// object twice (metadata with its managed fields, spec and all) and diffs
// the two: for a status write that was most of what a reconcile
// allocated after its install.
package statuspatch

import (
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MergeFrom is a patch of the status subresource taking before's status to
// after's (both the typed status structs, as the API's JSON encodes them).
// Sent to the status subresource, it changes what MergeFrom of the whole
// objects would: the API server ignores everything but the status there.
func MergeFrom(before, after any) client.Patch { return patch{before: before, after: after} }

type patch struct{ before, after any }

func (patch) Type() types.PatchType { return types.MergePatchType }

func (p patch) Data(client.Object) ([]byte, error) {
	from, err := json.Marshal(wrapped{p.before})
	if err != nil {
		return nil, fmt.Errorf("encoding the status: %w", err)
	}
	to, err := json.Marshal(wrapped{p.after})
	if err != nil {
		return nil, fmt.Errorf("encoding the status: %w", err)
	}
	return jsonpatch.CreateMergePatch(from, to)
}

type wrapped struct {
	Status any `json:"status"`
}
