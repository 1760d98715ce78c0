// Package leanmeta drops managedFields from the API server's metadata-only
// answers (as=PartialObjectMetadata, in protobuf) before client-go decodes
// them. Nothing in the provisioner reads managed fields, yet they are most
// of such an answer: the apply entry of a CustomResourceDefinition lists
// every field of its schema, so each watch event, apply answer or GET of a
// CRD's metadata cost several copies of about its schema's size, decoded
// and then thrown away by the caches' transforms.
//
// The rewrite is done on the protobuf wire form, copying every field but
// ObjectMeta.managedFields. Anything it does not recognise (other kinds,
// Status answers, JSON, malformed or oversized input) is passed on as it
// came, for client-go to decode or refuse as before.
package leanmeta

import (
	"bytes"
	"encoding/binary"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of k8s.io/apimachinery's generated.proto.
const (
	unknownTypeMeta    protowire.Number = 1 // runtime.Unknown.typeMeta
	unknownRaw         protowire.Number = 2 // runtime.Unknown.raw
	typeMetaAPIVersion protowire.Number = 1 // runtime.TypeMeta.apiVersion
	typeMetaKind       protowire.Number = 2 // runtime.TypeMeta.kind
	rawExtensionRaw    protowire.Number = 1 // runtime.RawExtension.raw
	watchEventObject   protowire.Number = 2 // metav1.WatchEvent.object
	partialMetadata    protowire.Number = 1 // metav1.PartialObjectMetadata.metadata
	partialListItems   protowire.Number = 2 // metav1.PartialObjectMetadataList.items
	objectMetaManaged  protowire.Number = 17
)

// magic starts every protobuf-encoded Kubernetes object (runtime.Unknown).
var magic = []byte{0x6b, 0x38, 0x73, 0x00}

// metaGroupVersion is PartialObjectMetadata's apiVersion.
const metaGroupVersion = "meta.k8s.io/v1"

// appendObject appends to dst the encoded object b (magic and
// runtime.Unknown) without managedFields, if it is a PartialObjectMetadata
// or PartialObjectMetadataList; ok is false for anything else.
func appendObject(dst, b []byte) ([]byte, bool) {
	rest, found := bytes.CutPrefix(b, magic)
	if !found {
		return dst, false
	}
	var inner rewriter
	switch apiVersion, kind := typeOf(rest); {
	case string(apiVersion) != metaGroupVersion:
		return dst, false
	case string(kind) == "PartialObjectMetadata":
		inner = appendPartial
	case string(kind) == "PartialObjectMetadataList":
		inner = appendPartialList
	default:
		return dst, false
	}
	dst = append(dst, magic...)
	return rewrite(dst, rest, unknownRaw, inner)
}

// appendWatchEvent appends to dst the metav1.WatchEvent b with its object
// rewritten by appendObject.
func appendWatchEvent(dst, b []byte) ([]byte, bool) {
	return rewrite(dst, b, watchEventObject, func(dst, ext []byte) ([]byte, bool) {
		return rewrite(dst, ext, rawExtensionRaw, appendObject)
	})
}

func appendPartial(dst, b []byte) ([]byte, bool) {
	return rewrite(dst, b, partialMetadata, appendObjectMeta)
}

func appendPartialList(dst, b []byte) ([]byte, bool) {
	return rewrite(dst, b, partialListItems, appendPartial)
}

// appendObjectMeta copies every field of the ObjectMeta b but
// managedFields.
func appendObjectMeta(dst, b []byte) ([]byte, bool) {
	for len(b) > 0 {
		f, ok := next(b)
		if !ok {
			return dst, false
		}
		switch {
		case f.num != objectMetaManaged:
			dst = append(dst, b[:f.len]...)
		case f.typ != protowire.BytesType:
			// Not what the API server sends: left for the decoder to refuse.
			return dst, false
		}
		b = b[f.len:]
	}
	return dst, true
}

// rewriter appends a rewritten message to dst.
type rewriter func(dst, msg []byte) ([]byte, bool)

// rewrite copies the fields of msg to dst, each length-delimited field
// numbered num passed through f (and its length prefix recomputed).
func rewrite(dst, msg []byte, num protowire.Number, f rewriter) ([]byte, bool) {
	for len(msg) > 0 {
		fl, ok := next(msg)
		if !ok {
			return dst, false
		}
		if fl.num != num || fl.typ != protowire.BytesType {
			dst = append(dst, msg[:fl.len]...)
			msg = msg[fl.len:]
			continue
		}
		dst = append(dst, msg[:fl.tagLen]...)
		start := len(dst)
		if dst, ok = f(dst, fl.bytes(msg)); !ok {
			return dst, false
		}
		dst = prefixLength(dst, start)
		msg = msg[fl.len:]
	}
	return dst, true
}

// zeros makes room for a length prefix without allocating.
var zeros [binary.MaxVarintLen64]byte

// prefixLength puts the length of dst[start:] as a varint before it.
func prefixLength(dst []byte, start int) []byte {
	n := len(dst) - start
	size := protowire.SizeVarint(uint64(n))
	dst = append(dst, zeros[:size]...)
	copy(dst[start+size:], dst[start:start+n])
	protowire.AppendVarint(dst[:start], uint64(n))
	return dst
}

// wireField is the field a message starts with.
type wireField struct {
	num    protowire.Number
	typ    protowire.Type
	tagLen int // bytes of its tag
	len    int // bytes of its tag and value
}

// next reads the field b starts with; ok is false if it is malformed.
func next(b []byte) (wireField, bool) {
	num, typ, tagLen := protowire.ConsumeTag(b)
	if tagLen < 0 {
		return wireField{}, false
	}
	valLen := protowire.ConsumeFieldValue(num, typ, b[tagLen:])
	if valLen < 0 {
		return wireField{}, false
	}
	return wireField{num: num, typ: typ, tagLen: tagLen, len: tagLen + valLen}, true
}

// bytes is the value of the length-delimited field f that b starts with.
func (f wireField) bytes(b []byte) []byte {
	v, _ := protowire.ConsumeBytes(b[f.tagLen:f.len])
	return v
}

// typeOf reads the apiVersion and kind of the runtime.Unknown b.
func typeOf(b []byte) (apiVersion, kind []byte) {
	for len(b) > 0 {
		f, ok := next(b)
		if !ok {
			return nil, nil
		}
		if f.num == unknownTypeMeta && f.typ == protowire.BytesType {
			tm := f.bytes(b)
			apiVersion, kind = bytesField(tm, typeMetaAPIVersion), bytesField(tm, typeMetaKind)
		}
		b = b[f.len:]
	}
	return apiVersion, kind
}

// bytesField is the last value of the length-delimited field num of the
// message b.
func bytesField(b []byte, num protowire.Number) []byte {
	var v []byte
	for len(b) > 0 {
		f, ok := next(b)
		if !ok {
			return nil
		}
		if f.num == num && f.typ == protowire.BytesType {
			v = f.bytes(b)
		}
		b = b[f.len:]
	}
	return v
}
