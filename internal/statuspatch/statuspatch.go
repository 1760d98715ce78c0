// Package statuspatch writes an object's status as a JSON merge patch of
// the status alone. controller-runtime's MergeFrom marshals the whole
// object twice (metadata with its managed fields, spec and all) and diffs
// the two: for a status write that was most of what a reconcile
// allocated after its install.
package statuspatch

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/internal/sortedkeys"
)

// MergeFrom is a patch of the status subresource taking before's status to
// after's (both the typed status structs, as the API's JSON encodes them).
// Sent to the status subresource, it changes what MergeFrom of the whole
// objects would: the API server ignores everything but the status there.
func MergeFrom(before, after any) client.Patch { return patch{before: before, after: after} }

type patch struct{ before, after any }

func (patch) Type() types.PatchType { return types.MergePatchType }

func (p patch) Data(client.Object) ([]byte, error) {
	from, err := json.Marshal(p.before)
	if err != nil {
		return nil, fmt.Errorf("encoding the status: %w", err)
	}
	to, err := json.Marshal(p.after)
	if err != nil {
		return nil, fmt.Errorf("encoding the status: %w", err)
	}
	var out bytes.Buffer
	out.WriteByte('{')
	if !bytes.Equal(from, to) {
		out.WriteString(`"status":`)
		if err := diff(&out, from, to); err != nil {
			return nil, err
		}
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}

// diff writes the merge patch (RFC 7386) taking the JSON value a to b,
// which differ: b itself unless both are objects, whose members are then
// compared one level at a time, so that only objects that differ are
// decoded further. json.Marshal writes equal values as equal bytes (struct
// fields in order, map keys sorted), so bytes compare values.
func diff(out *bytes.Buffer, a, b []byte) error {
	if !isObject(a) || !isObject(b) {
		out.Write(b)
		return nil
	}
	var am, bm map[string]json.RawMessage
	if err := json.Unmarshal(a, &am); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &bm); err != nil {
		return err
	}
	out.WriteByte('{')
	first := true
	for _, k := range sortedkeys.Union(bm, am) {
		av, inA := am[k]
		bv, inB := bm[k]
		if inA && inB && bytes.Equal(av, bv) {
			continue
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		name, err := json.Marshal(k)
		if err != nil {
			return err
		}
		out.Write(name)
		out.WriteByte(':')
		switch {
		case !inB:
			out.WriteString("null")
		case !inA:
			out.Write(bv)
		default:
			if err := diff(out, av, bv); err != nil {
				return err
			}
		}
	}
	out.WriteByte('}')
	return nil
}

func isObject(v []byte) bool {
	v = bytes.TrimLeft(v, " \t\r\n")
	return len(v) > 0 && v[0] == '{'
}
