package release

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/rukpak-dev/rukpak/internal/leanclient"
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
// fields the index keeps (its UID and resourceVersion). Records are sent
// in protobuf, encoded once (leanclient.Protobuf).
type leanSecrets struct {
	client    *leanclient.Client
	namespace string
}

var secretsResource = corev1.SchemeGroupVersion.WithResource("secrets").GroupResource()

func (l leanSecrets) Create(ctx context.Context, s *corev1.Secret, opts metav1.CreateOptions) (*metav1.ObjectMeta, error) {
	return l.write(ctx, http.MethodPost, "", s, opts.FieldManager, opts.DryRun)
}

func (l leanSecrets) Update(ctx context.Context, s *corev1.Secret, opts metav1.UpdateOptions) (*metav1.ObjectMeta, error) {
	if err := leanclient.CheckName(s.Name); err != nil {
		return nil, err
	}
	return l.write(ctx, http.MethodPut, "/"+leanclient.PathSegment(s.Name), s, opts.FieldManager, opts.DryRun)
}

func (l leanSecrets) write(ctx context.Context, method, name string, s *corev1.Secret, fieldManager string, dryRun []string) (*metav1.ObjectMeta, error) {
	if err := leanclient.CheckName(l.namespace); err != nil {
		return nil, err
	}
	if fieldManager != "" || len(dryRun) > 0 {
		return nil, errors.New("release records are written without a field manager or dry run")
	}
	body, err := leanclient.Protobuf(s, "v1", "Secret")
	if err != nil {
		return nil, fmt.Errorf("encoding the record: %w", err)
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := l.client.Write(ctx, method, "/api/v1/namespaces/"+leanclient.PathSegment(l.namespace)+"/secrets"+name, leanclient.ContentTypeProtobuf, body, m, secretsResource, s.Name); err != nil {
		return nil, err
	}
	// An API server that does not convert answers (a proxy in between
	// that drops the parameter) sends the whole Secret, whose metadata is
	// read all the same.
	if m.UID == "" || m.ResourceVersion == "" {
		return nil, fmt.Errorf("the API server answered with a %s without the metadata written", m.Kind)
	}
	return &m.ObjectMeta, nil
}
