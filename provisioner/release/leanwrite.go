package release

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// recordWriter creates and updates release records, answering with the
// metadata written.
type recordWriter interface {
	Create(ctx context.Context, s *corev1.Secret, opts metav1.CreateOptions) (*metav1.ObjectMeta, error)
	Update(ctx context.Context, s *corev1.Secret, opts metav1.UpdateOptions) (*metav1.ObjectMeta, error)
}

// typedWrites writes through a typed client, which decodes the whole
// answer.
type typedWrites struct{ secrets corev1client.SecretInterface }

func (t typedWrites) Create(ctx context.Context, s *corev1.Secret, opts metav1.CreateOptions) (*metav1.ObjectMeta, error) {
	created, err := t.secrets.Create(ctx, s, opts)
	if err != nil {
		return nil, err
	}
	return &created.ObjectMeta, nil
}

func (t typedWrites) Update(ctx context.Context, s *corev1.Secret, opts metav1.UpdateOptions) (*metav1.ObjectMeta, error) {
	updated, err := t.secrets.Update(ctx, s, opts)
	if err != nil {
		return nil, err
	}
	return &updated.ObjectMeta, nil
}

// leanSecrets creates and updates release records reading back only the
// metadata written: the API server answers a write with the whole object,
// which for a record is its compressed release again, decoded for the two
// fields the index keeps (its UID and resourceVersion).
type leanSecrets struct {
	client    rest.Interface
	namespace string
}

// metadataOnly asks the API server to answer with the object's metadata.
const metadataOnly = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

// maxMetadataAnswer bounds the answer decoded: a Secret's metadata (its
// labels, annotations and managed fields) is kilobytes, and a whole
// Secret at most 1 MiB of data (base64 in JSON).
const maxMetadataAnswer = 4 << 20

func (l leanSecrets) Create(ctx context.Context, s *corev1.Secret, opts metav1.CreateOptions) (*metav1.ObjectMeta, error) {
	return l.answer(l.client.Post().Namespace(l.namespace).Resource("secrets").
		VersionedParams(&opts, scheme.ParameterCodec).Body(s).SetHeader("Accept", metadataOnly).Do(ctx))
}

func (l leanSecrets) Update(ctx context.Context, s *corev1.Secret, opts metav1.UpdateOptions) (*metav1.ObjectMeta, error) {
	return l.answer(l.client.Put().Namespace(l.namespace).Resource("secrets").Name(s.Name).
		VersionedParams(&opts, scheme.ParameterCodec).Body(s).SetHeader("Accept", metadataOnly).Do(ctx))
}

func (l leanSecrets) answer(res rest.Result) (*metav1.ObjectMeta, error) {
	body, err := res.Raw()
	if err != nil {
		return nil, err
	}
	if len(body) > maxMetadataAnswer {
		return nil, fmt.Errorf("the API server answered with %d bytes of metadata", len(body))
	}
	var m metav1.PartialObjectMetadata
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("decoding the API server's answer: %w", err)
	}
	// An API server that does not convert answers (a proxy in between
	// that drops the parameter) sends the whole Secret, whose metadata is
	// read all the same.
	if m.UID == "" || m.ResourceVersion == "" {
		return nil, fmt.Errorf("the API server answered with a %s without the metadata written", m.Kind)
	}
	return &m.ObjectMeta, nil
}
