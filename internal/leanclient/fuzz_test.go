package leanclient

import (
	"bytes"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

func FuzzDecode(f *testing.F) {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	_ = metav1.AddMetaToScheme(s)
	in := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns", UID: "u", ResourceVersion: "9",
		Labels: map[string]string{"a": "b"}, OwnerReferences: []metav1.OwnerReference{{Name: "o"}},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m", FieldsV1: metav1.NewFieldsV1(`{"f:a":{}}`)}}}}
	in.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata"))
	var buf bytes.Buffer
	_ = protobuf.NewSerializer(s, s).Encode(in, &buf)
	f.Add(buf.Bytes())
	f.Add([]byte(answerJSON))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m metav1.PartialObjectMetadata
		_ = decode(b, "PartialObjectMetadata", &m)
		var st metav1.Status
		_ = decode(b, "Status", &st)
	})
}
