package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/provisioner/identity"
	"github.com/rukpak-dev/rukpak/provisioner/registry"
)

type rbacOptions struct {
	render         renderOptions
	serviceAccount string
	name           string
}

func newRBACCmd() *cobra.Command {
	o := rbacOptions{}
	cmd := &cobra.Command{
		Use:   "rbac DIR|IMAGE --service-account NAMESPACE/NAME",
		Short: "Print the RBAC a ServiceAccount needs to install a bundle",
		Long: `Rbac prints, as YAML documents, the smallest ClusterRole and Roles (with
their bindings to --service-account) that let a BundleDeployment naming that
ServiceAccount in spec.serviceAccount install, upgrade, correct and uninstall
the bundle: create, delete, get and patch on the resource of every object it
installs, in the namespace it goes to (cluster-wide for cluster-scoped kinds
and for namespaces the bundle creates, where no Role can exist before the
install); plus, because the API server lets no one grant permissions they do
not hold, every rule of the bundle's own Roles and ClusterRoles (escalate on a
ClusterRole with an aggregationRule, bind on a role the bundle binds but does
not ship). The provisioner runs the same check before it installs.

DIR, IMAGE, --format, --install-namespace and --watch-namespaces are read as
by render: the rules are for the objects render prints. For plain+v0 bundles
--install-namespace places objects that name no namespace, as a
BundleDeployment's spec.config.installNamespace does (for a plain+v0 IMAGE,
with --format plain+v0).

Kinds are mapped without a cluster: built-in kinds by their known scope, the
bundle's own CRDs by their spec, other kinds as namespaced when the object
names a namespace.`,
		Example: `  rukpakctl rbac ./my-bundle --service-account tenant-a/installer --install-namespace tenant-a | kubectl apply -f -
  rukpakctl rbac 127.0.0.1:5001/etcd-bundle:v0.9.4 --service-account etcd/installer --install-namespace etcd --watch-namespaces etcd`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args[0])
		},
	}
	cmd.Flags().StringVar(&o.serviceAccount, "service-account", "", "NAMESPACE/NAME of the ServiceAccount the BundleDeployment names (required)")
	cmd.Flags().StringVar(&o.name, "name", "", "name of the printed roles and bindings (default: rukpak-install-<service account name>)")
	bindRenderFlags(cmd, &o.render)
	return cmd
}

func (o rbacOptions) run(ctx context.Context, out io.Writer, arg string) error {
	if o.serviceAccount == "" {
		return errors.New("--service-account NAMESPACE/NAME is required")
	}
	sa, err := identity.Parse(o.serviceAccount)
	if err != nil {
		return err
	}
	name := o.name
	if name == "" {
		name = "rukpak-install-" + sa.Name
	}
	objs, err := o.objects(ctx, arg)
	if err != nil {
		return err
	}
	// The ServiceAccount's namespace exists already: an install namespace
	// the registry+v1 conversion adds is not created then (it is someone
	// else's), and Roles can be bound in it.
	kept := objs[:0]
	for _, o := range objs {
		if o.GetKind() == "Namespace" && o.GetAPIVersion() == "v1" && o.GetName() == sa.Namespace &&
			o.GetAnnotations()[registry.AnnotationCreatedNamespace] == "true" {
			continue
		}
		kept = append(kept, o)
	}
	plan, err := identity.NewPlan(kept, offlineMapping(kept))
	if err != nil {
		return err
	}
	delete(plan.Namespaces, sa.Namespace)
	return writeRBAC(out, identity.RequiredRules(plan), sa, name)
}

// objects are the objects render prints for arg (so what it prints is
// what these rules are for), placed as the provisioner places them.
func (o rbacOptions) objects(ctx context.Context, arg string) ([]*unstructured.Unstructured, error) {
	ro := o.render
	installNS := ro.installNS
	plainFormat := ro.format == formatPlain
	if ro.format == "" && !isImageRef(arg) {
		if b, err := openBundle(ctx, arg, ro.limits); err == nil {
			plainFormat = detectFormat(b) == formatPlain
			b.close()
		}
	}
	if plainFormat {
		ro.installNS = ""
	}
	var rendered bytes.Buffer
	if err := ro.run(ctx, &rendered, arg); err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(&rendered, 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("reading rendered objects: %w", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if plainFormat && installNS != "" && u.GetNamespace() == "" {
			u.SetNamespace(installNS)
		}
		objs = append(objs, u)
	}
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

// offlineMapping maps kinds without a cluster (see newRBACCmd).
func offlineMapping(objs []*unstructured.Unstructured) identity.Mapping {
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

// writeRBAC prints a ClusterRole and ClusterRoleBinding for the
// cluster-wide rules and a Role and RoleBinding per namespace, each bound
// to sa.
func writeRBAC(out io.Writer, rules []identity.Rule, sa identity.ServiceAccount, name string) error {
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}}
	byNS := map[string][]rbacv1.PolicyRule{}
	var order []string
	for _, r := range rules {
		if _, ok := byNS[r.Namespace]; !ok {
			order = append(order, r.Namespace)
		}
		byNS[r.Namespace] = append(byNS[r.Namespace], r.PolicyRule)
	}
	var docs []any
	for _, ns := range order {
		meta := metav1.ObjectMeta{Name: name, Namespace: ns}
		if ns == "" {
			docs = append(docs,
				&rbacv1.ClusterRole{TypeMeta: typeMeta("ClusterRole"), ObjectMeta: meta, Rules: byNS[ns]},
				&rbacv1.ClusterRoleBinding{TypeMeta: typeMeta("ClusterRoleBinding"), ObjectMeta: meta, Subjects: subject,
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}})
			continue
		}
		docs = append(docs,
			&rbacv1.Role{TypeMeta: typeMeta("Role"), ObjectMeta: meta, Rules: byNS[ns]},
			&rbacv1.RoleBinding{TypeMeta: typeMeta("RoleBinding"), ObjectMeta: meta, Subjects: subject,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}})
	}
	for _, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return err
		}
		// ObjectMeta's creationTimestamp: null is noise to paste.
		b = bytes.Replace(b, []byte("  creationTimestamp: null\n"), nil, 1)
		if _, err := fmt.Fprintf(out, "---\n%s", b); err != nil {
			return err
		}
	}
	return nil
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: kind}
}
