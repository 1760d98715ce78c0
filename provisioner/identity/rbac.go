package identity

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/provisioner/registry"
)

// RBAC returns the ClusterRole, Roles and their bindings, all named name,
// that let sa install objs (RequiredRules, with kinds mapped offline): a
// ClusterRole and ClusterRoleBinding for the cluster-wide rules, a Role and
// RoleBinding in each namespace. sa's namespace exists already, so the
// install namespace the registry+v1 conversion adds for it is not created
// (the provisioner uses an existing one) and Roles can be bound there.
func RBAC(objs []*unstructured.Unstructured, sa ServiceAccount, name string) ([]client.Object, error) {
	kept := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if o.GetKind() == "Namespace" && o.GetAPIVersion() == "v1" && o.GetName() == sa.Namespace &&
			o.GetAnnotations()[registry.AnnotationCreatedNamespace] == "true" {
			continue
		}
		kept = append(kept, o)
	}
	plan, err := NewPlan(kept, OfflineMapping(kept))
	if err != nil {
		return nil, err
	}
	delete(plan.Namespaces, sa.Namespace)
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}}
	byNS := map[string][]rbacv1.PolicyRule{}
	var order []string
	for _, r := range RequiredRules(plan) {
		if _, ok := byNS[r.Namespace]; !ok {
			order = append(order, r.Namespace)
		}
		byNS[r.Namespace] = append(byNS[r.Namespace], r.PolicyRule)
	}
	var out []client.Object
	for _, ns := range order {
		meta := metav1.ObjectMeta{Name: name, Namespace: ns}
		if ns == "" {
			out = append(out,
				&rbacv1.ClusterRole{TypeMeta: typeMeta("ClusterRole"), ObjectMeta: meta, Rules: byNS[ns]},
				&rbacv1.ClusterRoleBinding{TypeMeta: typeMeta("ClusterRoleBinding"), ObjectMeta: meta, Subjects: subject,
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}})
			continue
		}
		out = append(out,
			&rbacv1.Role{TypeMeta: typeMeta("Role"), ObjectMeta: meta, Rules: byNS[ns]},
			&rbacv1.RoleBinding{TypeMeta: typeMeta("RoleBinding"), ObjectMeta: meta, Subjects: subject,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}})
	}
	return out, nil
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: kind}
}

// clusterScoped are the built-in kinds that are not namespaced, by group.
var clusterScoped = map[schema.GroupKind]bool{
	{Kind: "Namespace"}:        true,
	{Kind: "Node"}:             true,
	{Kind: "PersistentVolume"}: true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}:          true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                        true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                               true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                      true,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}:                 true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                       true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}:       true,
	{Group: "console.openshift.io", Kind: "ConsoleCLIDownload"}:                       true,
	{Group: "console.openshift.io", Kind: "ConsoleLink"}:                              true,
	{Group: "console.openshift.io", Kind: "ConsolePlugin"}:                            true,
	{Group: "console.openshift.io", Kind: "ConsoleQuickStart"}:                        true,
	{Group: "console.openshift.io", Kind: "ConsoleYAMLSample"}:                        true,
	{Group: "resource.k8s.io", Kind: "DeviceClass"}:                                   true,
	{Group: "resource.k8s.io", Kind: "ResourceSlice"}:                                 true,
	{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"}:                        true,
	{Group: "internal.apiserver.k8s.io", Kind: "StorageVersion"}:                      true,
	{Group: "networking.k8s.io", Kind: "IPAddress"}:                                   true,
	{Group: "networking.k8s.io", Kind: "ServiceCIDR"}:                                 true,
	{Group: "storagemigration.k8s.io", Kind: "StorageVersionMigration"}:               true,
	{Group: "policy", Kind: "PodSecurityPolicy"}:                                      true,
}

// irregular are built-in kinds whose resource is not the guessed plural.
var irregular = map[string]string{"Endpoints": "endpoints"}

// OfflineMapping maps kinds without a cluster: built-in kinds by their
// known scope, other kinds as namespaced when an object of objs names a
// namespace (NoMatch otherwise, so the bundle's CRDs say).
func OfflineMapping(objs []*unstructured.Unstructured) Mapping {
	namespacedUse := map[schema.GroupKind]bool{}
	for _, o := range objs {
		if o.GetNamespace() != "" {
			namespacedUse[o.GroupVersionKind().GroupKind()] = true
		}
	}
	return func(gvk schema.GroupVersionKind) (string, bool, error) {
		gk := gvk.GroupKind()
		resource, ok := irregular[gk.Kind]
		if !ok {
			plural, _ := meta.UnsafeGuessKindToResource(gvk)
			resource = plural.Resource
		}
		if clusterScoped[gk] {
			return resource, false, nil
		}
		if gk.Group == "" || strings.HasSuffix(gk.Group, ".k8s.io") || !strings.Contains(gk.Group, ".") || namespacedUse[gk] {
			return resource, true, nil
		}
		// A kind of someone else's CRD used without a namespace: let the
		// bundle's CRDs say, else call it cluster-scoped.
		return "", false, &meta.NoKindMatchError{GroupKind: gk}
	}
}
