package servingcert

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// Issuer keeps the certificate Secrets of releases filled.
type Issuer struct {
	// Reader reads live Secrets; an uncached reader, so no informer holds
	// every Secret of the cluster.
	Reader client.Reader
	// Now defaults to time.Now.
	Now func() time.Time
	// Validity and RenewBefore default to DefaultValidity and
	// DefaultRenewBefore; RenewBefore must be shorter than Validity.
	Validity    time.Duration
	RenewBefore time.Duration
}

// maxCertificates bounds the certificate Secrets of one release.
const maxCertificates = 64

// Prepare fills, in objs, each certificate Secret's data and each caBundle
// that AnnotationInjectCAFrom asks for. owner is the release (the
// BundleDeployment): a live Secret is reused only if it is that release's.
// It returns when the earliest kept certificate is due (zero if none).
func (i *Issuer) Prepare(ctx context.Context, owner string, objs []*unstructured.Unstructured) (time.Time, error) {
	now := time.Now()
	if i.Now != nil {
		now = i.Now()
	}
	validity, renewBefore := i.Validity, i.RenewBefore
	if validity <= 0 {
		validity = DefaultValidity
	}
	if renewBefore <= 0 {
		renewBefore = DefaultRenewBefore
	}
	if renewBefore >= validity {
		return time.Time{}, fmt.Errorf("certificate renewal %s before expiry is not shorter than their validity %s", renewBefore, validity)
	}
	bundles := map[string][]byte{}
	var due time.Time
	for _, obj := range objs {
		names, ok := obj.GetAnnotations()[AnnotationDNSNames]
		if !ok || !isSecret(obj) {
			continue
		}
		if len(bundles) == maxCertificates {
			return time.Time{}, fmt.Errorf("more than %d Secrets ask for serving certificates", maxCertificates)
		}
		dnsNames := splitNames(names)
		for _, n := range dnsNames {
			if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
				return time.Time{}, fmt.Errorf("certificate Secret %s/%s: annotation %s: %q is not a DNS name: %s", obj.GetNamespace(), obj.GetName(), AnnotationDNSNames, n, strings.Join(errs, "; "))
			}
		}
		live, err := i.live(ctx, owner, obj)
		if err != nil {
			return time.Time{}, err
		}
		data := live
		d := Decide(now, live, dnsNames, renewBefore)
		if d.Renew {
			if data, err = Issue(now, dnsNames, validity, live); err != nil {
				return time.Time{}, fmt.Errorf("certificate Secret %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
			}
			d.RenewAt = now.Add(validity - renewBefore)
		}
		if due.IsZero() || d.RenewAt.Before(due) {
			due = d.RenewAt
		}
		encoded := map[string]interface{}{}
		for _, k := range []string{CertFile, KeyFile, CAFile} {
			encoded[k] = base64.StdEncoding.EncodeToString(data[k])
		}
		obj.Object["data"] = encoded
		bundles[obj.GetNamespace()+"/"+obj.GetName()] = data[CAFile]
	}
	return due, inject(objs, func(from string) ([]byte, bool) {
		b, ok := bundles[from]
		return b, ok
	})
}

// live returns the data of the live Secret obj names, if it is owner's.
func (i *Issuer) live(ctx context.Context, owner string, obj *unstructured.Unstructured) (map[string][]byte, error) {
	s := &corev1.Secret{}
	err := i.Reader.Get(ctx, client.ObjectKeyFromObject(obj), s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading certificate Secret %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	// Someone else's Secret under that name: its CA must never be trusted.
	// The apply then refuses to take the Secret over, and says so.
	if _, rel := release.Owner(s); rel != owner || s.Labels[rukpakv1alpha1.LabelOwnerName] != owner {
		return nil, nil
	}
	return s.Data, nil
}

func isSecret(obj *unstructured.Unstructured) bool {
	return obj.GetAPIVersion() == "v1" && obj.GetKind() == "Secret"
}

// PlaceholderCA is the CA bundle Placeholder injects.
const PlaceholderCA = "PLACEHOLDER: the CA bundle the provisioner issues at install\n"

// Placeholder fills certificate Secrets and CA bundles with placeholder
// text instead of certificates, so rendered content shows where they go.
func Placeholder(objs []*unstructured.Unstructured) error {
	issued := map[string]bool{}
	for _, obj := range objs {
		if _, ok := obj.GetAnnotations()[AnnotationDNSNames]; !ok || !isSecret(obj) {
			continue
		}
		data := map[string]interface{}{}
		for _, k := range []string{CertFile, KeyFile, CAFile} {
			data[k] = base64.StdEncoding.EncodeToString([]byte("PLACEHOLDER: " + k + " issued by the provisioner at install\n"))
		}
		obj.Object["data"] = data
		issued[obj.GetNamespace()+"/"+obj.GetName()] = true
	}
	return inject(objs, func(from string) ([]byte, bool) {
		return []byte(PlaceholderCA), issued[from]
	})
}

// inject sets the caBundle fields of every object that asks for one.
func inject(objs []*unstructured.Unstructured, bundle func(from string) ([]byte, bool)) error {
	for _, obj := range objs {
		from, ok := obj.GetAnnotations()[AnnotationInjectCAFrom]
		if !ok {
			continue
		}
		ca, ok := bundle(from)
		if !ok {
			return fmt.Errorf("%s %q: annotation %s names Secret %q, which is not a certificate Secret of the same content (annotated %s)",
				obj.GetKind(), obj.GetName(), AnnotationInjectCAFrom, from, AnnotationDNSNames)
		}
		if err := setCABundle(obj, base64.StdEncoding.EncodeToString(ca)); err != nil {
			return fmt.Errorf("%s %q: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

func setCABundle(obj *unstructured.Unstructured, ca string) error {
	gk := obj.GroupVersionKind().GroupKind()
	switch {
	case gk.Group == "admissionregistration.k8s.io" && (gk.Kind == "ValidatingWebhookConfiguration" || gk.Kind == "MutatingWebhookConfiguration"):
		hooks, _, err := unstructured.NestedSlice(obj.Object, "webhooks")
		if err != nil {
			return fmt.Errorf("webhooks: %w", err)
		}
		for i, h := range hooks {
			m, ok := h.(map[string]interface{})
			if !ok {
				return fmt.Errorf("webhooks[%d] is not an object", i)
			}
			if err := unstructured.SetNestedField(m, ca, "clientConfig", "caBundle"); err != nil {
				return fmt.Errorf("webhooks[%d].clientConfig: %w", i, err)
			}
		}
		return unstructured.SetNestedSlice(obj.Object, hooks, "webhooks")
	case gk.Group == "apiextensions.k8s.io" && gk.Kind == "CustomResourceDefinition":
		if s, _, _ := unstructured.NestedString(obj.Object, "spec", "conversion", "strategy"); s != "Webhook" {
			return fmt.Errorf("asks for a CA bundle but spec.conversion.strategy is %q, not Webhook", s)
		}
		return unstructured.SetNestedField(obj.Object, ca, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	case gk.Group == "apiregistration.k8s.io" && gk.Kind == "APIService":
		return unstructured.SetNestedField(obj.Object, ca, "spec", "caBundle")
	}
	return fmt.Errorf("annotation %s is not supported on kind %s", AnnotationInjectCAFrom, obj.GetKind())
}

// ExcludeNamespace keeps every admission webhook in objs away from
// namespace (the provisioner's own, where it records releases): a failing
// webhook of one operator must never block the installs of others.
// Cluster-scoped objects still reach the webhooks.
func ExcludeNamespace(objs []*unstructured.Unstructured, namespace string) error {
	exclude := map[string]interface{}{"key": corev1.LabelMetadataName, "operator": "NotIn", "values": []interface{}{namespace}}
	for _, obj := range objs {
		gk := obj.GroupVersionKind().GroupKind()
		if gk.Group != "admissionregistration.k8s.io" || (gk.Kind != "ValidatingWebhookConfiguration" && gk.Kind != "MutatingWebhookConfiguration") {
			continue
		}
		hooks, _, err := unstructured.NestedSlice(obj.Object, "webhooks")
		if err != nil {
			return fmt.Errorf("%s %q: webhooks: %w", gk.Kind, obj.GetName(), err)
		}
		for i, h := range hooks {
			m, ok := h.(map[string]interface{})
			if !ok {
				return fmt.Errorf("%s %q: webhooks[%d] is not an object", gk.Kind, obj.GetName(), i)
			}
			exprs, _, err := unstructured.NestedSlice(m, "namespaceSelector", "matchExpressions")
			if err != nil {
				return fmt.Errorf("%s %q: webhooks[%d].namespaceSelector: %w", gk.Kind, obj.GetName(), i, err)
			}
			if err := unstructured.SetNestedSlice(m, append(exprs, exclude), "namespaceSelector", "matchExpressions"); err != nil {
				return fmt.Errorf("%s %q: webhooks[%d].namespaceSelector: %w", gk.Kind, obj.GetName(), i, err)
			}
		}
		if err := unstructured.SetNestedSlice(obj.Object, hooks, "webhooks"); err != nil {
			return err
		}
	}
	return nil
}
