package registry

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// AnnotationCreatedNamespace marks the Namespace a conversion emits for the
// install namespace. An installer may delete a Namespace carrying it on
// uninstall only if it created it (it did not exist before the install);
// a pre-existing namespace must be adopted, never deleted.
const AnnotationCreatedNamespace = "core.rukpak.io/created-namespace"

// AnnotationTargetNamespaces is set on every operator pod template to the
// comma-separated watched namespaces ("" for all), as OLM does.
const AnnotationTargetNamespaces = "olm.targetNamespaces"

// AnnotationOperatorNamespace is set on every operator pod template to the
// install namespace, as OLM does; operators read it through the downward API
// (metadata.annotations['olm.operatorNamespace']).
const AnnotationOperatorNamespace = "olm.operatorNamespace"

// systemNamespaces always exist and are never emitted as objects to install.
var systemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

const rbacAPIVersion = "rbac.authorization.k8s.io/v1"

// generator turns a validated bundle into the objects to install.
type generator struct {
	b     *bundle
	t     target
	names nameSet
	objs  []*unstructured.Unstructured
}

// generate consumes b: the bundle's own objects are emitted as they are,
// not copied (a CRD's copy was a tenth of everything a conversion
// allocated), so b is loaded for one rendering and not used after it.
func generate(b *bundle, t target) ([]*unstructured.Unstructured, error) {
	g := &generator{b: b, t: t, names: nameSet{}}
	if err := g.reserveBundleNames(); err != nil {
		return nil, err
	}
	if !slices.Contains(systemNamespaces, t.installNamespace) {
		g.emit(object("v1", "Namespace", t.installNamespace, "", func(m map[string]interface{}) {
			m["metadata"].(map[string]interface{})["annotations"] = map[string]interface{}{AnnotationCreatedNamespace: "true"}
		}))
	}
	for _, crd := range b.crds {
		g.emit(crd)
	}
	sas, err := g.serviceAccounts()
	if err != nil {
		return nil, err
	}
	for _, sa := range sas {
		g.emit(object("v1", "ServiceAccount", sa, t.installNamespace, nil))
	}
	install := b.csv.Spec.Install.Spec
	for _, p := range install.Permissions {
		if t.allNamespaces() {
			rules := append(slices.Clone(p.Rules), map[string]interface{}{
				"apiGroups": []interface{}{""},
				"resources": []interface{}{"namespaces"},
				"verbs":     []interface{}{"get", "list", "watch"},
			})
			g.clusterRBAC(p.ServiceAccountName, p.ServiceAccountName, rules)
			continue
		}
		// As OLM v0, the operator also gets its permissions in its own
		// (install) namespace, where operators take their leader-election
		// lock, then in each watched namespace.
		g.namespacedRBAC(p.ServiceAccountName, t.installNamespace, p.Rules)
		for _, ns := range t.watchNamespaces {
			if ns != t.installNamespace {
				g.namespacedRBAC(p.ServiceAccountName, ns, p.Rules)
			}
		}
	}
	for _, p := range install.ClusterPermissions {
		g.clusterRBAC(p.ServiceAccountName, p.ServiceAccountName+"-cluster", p.Rules)
	}
	for _, obj := range b.others {
		g.emit(g.placed(obj))
	}
	for _, d := range install.Deployments {
		dep, err := g.deployment(d)
		if err != nil {
			return nil, err
		}
		g.emit(dep)
	}
	if err := g.addServing(); err != nil {
		return nil, err
	}
	return g.objs, nil
}

func (g *generator) emit(obj *unstructured.Unstructured) { g.objs = append(g.objs, obj) }

// reserveBundleNames claims the names of the objects the bundle ships, so
// generated objects never collide with them.
func (g *generator) reserveBundleNames() error {
	for _, obj := range g.b.crds {
		if !g.names.reserve(kindCRD, "", obj.GetName()) {
			return fmt.Errorf("the bundle contains CustomResourceDefinition %q more than once", obj.GetName())
		}
	}
	for _, obj := range g.b.others {
		if !g.names.reserve(obj.GetKind(), g.namespaceFor(obj.GetKind()), obj.GetName()) {
			return fmt.Errorf("the bundle contains %s %q more than once", obj.GetKind(), obj.GetName())
		}
	}
	for _, d := range g.b.csv.Spec.Install.Spec.Deployments {
		if !g.names.reserve("Deployment", g.t.installNamespace, d.Name) {
			return fmt.Errorf("spec.install.spec.deployments names %q more than once", d.Name)
		}
	}
	return nil
}

func (g *generator) namespaceFor(kind string) string {
	if supportedKinds[kind] {
		return g.t.installNamespace
	}
	return ""
}

// serviceAccounts lists, sorted, the service accounts the operator runs as
// that the bundle does not ship itself. "default" always exists.
func (g *generator) serviceAccounts() ([]string, error) {
	set := map[string]bool{}
	install := g.b.csv.Spec.Install.Spec
	for _, d := range install.Deployments {
		sa, err := podServiceAccount(d)
		if err != nil {
			return nil, err
		}
		set[sa] = true
	}
	for _, p := range append(slices.Clone(install.Permissions), install.ClusterPermissions...) {
		set[p.ServiceAccountName] = true
	}
	delete(set, "")
	delete(set, "default")
	var out []string
	for sa := range set {
		if g.names.reserve("ServiceAccount", g.t.installNamespace, sa) {
			out = append(out, sa)
		}
	}
	sort.Strings(out)
	return out, nil
}

func podServiceAccount(d strategyDeployment) (string, error) {
	for _, field := range []string{"serviceAccountName", "serviceAccount"} {
		sa, _, err := unstructured.NestedString(d.Spec, "template", "spec", field)
		if err != nil {
			return "", fmt.Errorf("deployment %q: spec.template.spec.%s: %w", d.Name, field, err)
		}
		if sa != "" {
			return sa, nil
		}
	}
	return "", nil
}

func (g *generator) namespacedRBAC(sa, namespace string, rules []interface{}) {
	name := g.names.allocate("Role", namespace, g.b.csv.Metadata.Name+"-"+sa)
	g.names.reserve("RoleBinding", namespace, name)
	g.emit(object(rbacAPIVersion, "Role", name, namespace, func(m map[string]interface{}) {
		m["rules"] = runtime.DeepCopyJSONValue(orEmpty(rules))
	}))
	g.emit(g.binding("RoleBinding", "Role", name, namespace, sa))
}

func (g *generator) clusterRBAC(sa, suffix string, rules []interface{}) {
	name := g.names.allocate("ClusterRole", "", g.b.csv.Metadata.Name+"-"+suffix)
	g.names.reserve("ClusterRoleBinding", "", name)
	g.emit(object(rbacAPIVersion, "ClusterRole", name, "", func(m map[string]interface{}) {
		m["rules"] = runtime.DeepCopyJSONValue(orEmpty(rules))
	}))
	g.emit(g.binding("ClusterRoleBinding", "ClusterRole", name, "", sa))
}

func (g *generator) binding(kind, roleKind, name, namespace, sa string) *unstructured.Unstructured {
	return object(rbacAPIVersion, kind, name, namespace, func(m map[string]interface{}) {
		m["roleRef"] = map[string]interface{}{"apiGroup": "rbac.authorization.k8s.io", "kind": roleKind, "name": name}
		m["subjects"] = []interface{}{map[string]interface{}{"kind": "ServiceAccount", "name": sa, "namespace": g.t.installNamespace}}
	})
}

// placed puts a bundle object in the install namespace if its kind is
// namespaced. ServiceAccount subjects of bundled bindings that name no
// namespace refer to the install namespace.
func (g *generator) placed(obj *unstructured.Unstructured) *unstructured.Unstructured {
	obj.SetNamespace(g.namespaceFor(obj.GetKind()))
	if kind := obj.GetKind(); kind == "RoleBinding" || kind == "ClusterRoleBinding" {
		subjects, _, _ := unstructured.NestedSlice(obj.Object, "subjects")
		for _, s := range subjects {
			if m, ok := s.(map[string]interface{}); ok && m["kind"] == "ServiceAccount" && m["namespace"] == nil {
				m["namespace"] = g.t.installNamespace
			}
		}
		if subjects != nil {
			_ = unstructured.SetNestedSlice(obj.Object, subjects, "subjects")
		}
	}
	return obj
}

func (g *generator) deployment(d strategyDeployment) (*unstructured.Unstructured, error) {
	spec := runtime.DeepCopyJSON(orEmptyMap(d.Spec))
	annotations := map[string]interface{}{}
	for k, v := range g.b.csv.Metadata.Annotations {
		annotations[k] = v
	}
	// The pod template's own annotations win over the CSV's.
	podAnnotations, _, err := unstructured.NestedMap(spec, "template", "metadata", "annotations")
	if err != nil {
		return nil, fmt.Errorf("deployment %q: spec.template.metadata.annotations: %w", d.Name, err)
	}
	for k, v := range podAnnotations {
		annotations[k] = v
	}
	annotations[AnnotationTargetNamespaces] = strings.Join(g.t.watchNamespaces, ",")
	annotations[AnnotationOperatorNamespace] = g.t.installNamespace
	if err := unstructured.SetNestedMap(spec, annotations, "template", "metadata", "annotations"); err != nil {
		return nil, fmt.Errorf("deployment %q: spec.template.metadata: %w", d.Name, err)
	}
	// OLM (v0 and v1) keeps one old ReplicaSet per operator Deployment,
	// whatever the CSV asks for.
	spec["revisionHistoryLimit"] = int64(1)

	return object("apps/v1", "Deployment", d.Name, g.t.installNamespace, func(m map[string]interface{}) {
		if len(d.Label) > 0 {
			labels := map[string]interface{}{}
			for k, v := range d.Label {
				labels[k] = v
			}
			m["metadata"].(map[string]interface{})["labels"] = labels
		}
		m["spec"] = spec
	}), nil
}

func orEmpty(s []interface{}) []interface{} {
	if s == nil {
		return []interface{}{}
	}
	return s
}

func orEmptyMap(m map[string]interface{}) map[string]interface{} {
	if m == nil {
		return map[string]interface{}{}
	}
	return m
}

// object builds an unstructured object; fill adds the fields beyond
// metadata.name and metadata.namespace.
func object(apiVersion, kind, name, namespace string, fill func(map[string]interface{})) *unstructured.Unstructured {
	meta := map[string]interface{}{"name": name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	m := map[string]interface{}{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
	if fill != nil {
		fill(m)
	}
	return &unstructured.Unstructured{Object: m}
}
