package identity

import (
	"fmt"
	"sort"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ApplyVerbs are what installing, upgrading, correcting and uninstalling
// one object take: server-side apply is a patch, which creates the object
// when it is missing (create); the ownership check before it and drift
// correction read it (get); an uninstall, or an upgrade that drops it,
// deletes it. The ownership check's LIST is an optimisation that falls
// back to GETs when refused, so list is not needed.
var ApplyVerbs = []string{"create", "delete", "get", "patch"}

// maxAtomicRules bounds the single-verb, single-resource rules the RBAC
// objects of one bundle break down into (what the escalation check
// compares): a hostile ClusterRole of 1,000 groups, resources and verbs
// each would be a billion.
const maxAtomicRules = 100_000

// Mapping resolves a kind to its resource and scope; NoMatch errors for
// kinds the cluster does not serve.
type Mapping func(gvk schema.GroupVersionKind) (resource string, namespaced bool, err error)

// Resource is one resource in one namespace ("" for cluster-scoped ones)
// that a bundle's objects are applied as.
type Resource struct {
	Group, Resource, Namespace string
	// Watched: Helm waits for a hook of this resource (a Job or Pod) with
	// a list and watch, which need their verbs too.
	Watched bool
}

// WatchVerbs are what Helm's wait for a hook Job or Pod takes besides
// ApplyVerbs.
var WatchVerbs = []string{"list", "watch"}

// Verbs are the verbs r needs.
func (r Resource) Verbs() []string {
	if r.Watched {
		return append(append([]string{}, ApplyVerbs...), WatchVerbs...)
	}
	return ApplyVerbs
}

// watchedHook says whether Helm waits for o with a watch: a hook (the
// helm class's) Job or Pod.
func watchedHook(o *unstructured.Unstructured) bool {
	if _, hook := o.GetAnnotations()["helm.sh/hook"]; !hook {
		return false
	}
	gvk := o.GroupVersionKind()
	return gvk.GroupKind() == schema.GroupKind{Group: "batch", Kind: "Job"} || gvk.GroupKind() == schema.GroupKind{Kind: "Pod"}
}

// Grant is a permission requirement of the API server's RBAC escalation
// check: creating or updating a Role or ClusterRole, or a binding, needs
// its creator to hold the rules it grants (in Namespace, "" meaning
// cluster-wide), unless Alternative (escalate on the role, bind on the
// bound role) is allowed.
type Grant struct {
	// Object is the bundle's object that needs it, e.g. `ClusterRole foo`.
	Object    string
	Namespace string
	// Rules are the rules to hold; nil for a binding of a role the bundle
	// does not have (the rules are the cluster's).
	Rules []rbacv1.PolicyRule
	// RoleRef is the role a binding binds.
	RoleRef *rbacv1.RoleRef
	// FullAuthority: a ClusterRole with an aggregationRule, which may only
	// be created by someone holding every permission.
	FullAuthority bool
	Alternative   authorizationv1.ResourceAttributes
}

// Plan is what installing a bundle's objects takes.
type Plan struct {
	Resources []Resource
	Grants    []Grant
	// Namespaces are the namespaces the bundle creates: no Role can be
	// bound there before it is installed, so what is needed in them is
	// needed cluster-wide.
	Namespaces map[string]bool
}

// hoist moves rules needed in namespaces the bundle creates to
// cluster-wide.
func (p *Plan) hoist(rules []Rule) []Rule {
	for i := range rules {
		if p.Namespaces[rules[i].Namespace] {
			rules[i].Namespace = ""
		}
	}
	return rules
}

// NewPlan works out what installing objs takes. Kinds mapping does not
// know and no CRD among objs defines are left out: their apply fails with
// the kind named.
func NewPlan(objs []*unstructured.Unstructured, mapping Mapping) (*Plan, error) {
	crds, err := bundleCRDs(objs)
	if err != nil {
		return nil, err
	}
	type key struct{ group, resource, namespace string }
	used := map[key]bool{}                    // value: watched
	roles := map[string][]rbacv1.PolicyRule{} // by roleRefKey
	var roleObjs, bindings []*unstructured.Unstructured
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		resource, namespaced, err := mapping(gvk)
		if err != nil {
			crd, ok := crds[gvk.GroupKind()]
			if !ok {
				continue
			}
			resource, namespaced = crd.Spec.Names.Plural, crd.Spec.Scope == apiextensionsv1.NamespaceScoped
		}
		ns := o.GetNamespace()
		if !namespaced {
			ns = ""
		}
		k := key{gvk.Group, resource, ns}
		used[k] = used[k] || watchedHook(o)
		if gvk.Group != rbacv1.GroupName {
			continue
		}
		switch gvk.Kind {
		case "Role", "ClusterRole":
			var r struct {
				Rules           []rbacv1.PolicyRule     `json:"rules"`
				AggregationRule *rbacv1.AggregationRule `json:"aggregationRule"`
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
				return nil, fmt.Errorf("reading %s %s: %w", gvk.Kind, o.GetName(), err)
			}
			roles[roleRefKey(ns, gvk.Kind, o.GetName())] = r.Rules
			roleObjs = append(roleObjs, o)
		case "RoleBinding", "ClusterRoleBinding":
			bindings = append(bindings, o)
		}
	}
	p := &Plan{Namespaces: map[string]bool{}}
	for _, o := range objs {
		if o.GroupVersionKind() == (schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}) {
			p.Namespaces[o.GetName()] = true
		}
	}
	for k, watched := range used {
		p.Resources = append(p.Resources, Resource{Group: k.group, Resource: k.resource, Namespace: k.namespace, Watched: watched})
	}
	sort.Slice(p.Resources, func(i, j int) bool {
		a, b := p.Resources[i], p.Resources[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		return a.Resource < b.Resource
	})
	atomic := 0
	for _, o := range roleObjs {
		kind, ns := o.GetKind(), o.GetNamespace()
		if kind == "ClusterRole" {
			ns = ""
		}
		rules := roles[roleRefKey(ns, kind, o.GetName())]
		for _, r := range rules {
			atomic += atomicCount(r)
		}
		if atomic > maxAtomicRules {
			return nil, fmt.Errorf("the bundle's Roles and ClusterRoles grant more than %d single-verb rules, more than the escalation check is run on", maxAtomicRules)
		}
		resource := "roles"
		if kind == "ClusterRole" {
			resource = "clusterroles"
		}
		g := Grant{
			Object:      describe(o),
			Namespace:   ns,
			Rules:       rules,
			Alternative: authorizationv1.ResourceAttributes{Verb: "escalate", Group: rbacv1.GroupName, Resource: resource, Namespace: ns, Name: o.GetName()},
		}
		if _, ok, _ := unstructured.NestedMap(o.Object, "aggregationRule"); ok {
			g.FullAuthority = true
		}
		p.Grants = append(p.Grants, g)
	}
	for _, o := range bindings {
		var b struct {
			RoleRef rbacv1.RoleRef `json:"roleRef"`
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
			return nil, fmt.Errorf("reading %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		ns := o.GetNamespace()
		if o.GetKind() == "ClusterRoleBinding" {
			ns = ""
		}
		resource := "roles"
		refNS := ns
		if b.RoleRef.Kind == "ClusterRole" {
			resource, refNS = "clusterroles", ""
		}
		g := Grant{
			Object:      describe(o),
			Namespace:   ns,
			RoleRef:     &b.RoleRef,
			Alternative: authorizationv1.ResourceAttributes{Verb: "bind", Group: rbacv1.GroupName, Resource: resource, Namespace: ns, Name: b.RoleRef.Name},
		}
		// The bound role's rules are the bundle's when it has the role
		// (it is applied first), else the cluster's.
		if rules, ok := roles[roleRefKey(refNS, b.RoleRef.Kind, b.RoleRef.Name)]; ok {
			g.Rules = append([]rbacv1.PolicyRule{}, rules...)
		}
		p.Grants = append(p.Grants, g)
	}
	return p, nil
}

// bundleCRDs are the CRDs among objs by the kind they define: their kinds
// cannot be mapped before they are installed.
func bundleCRDs(objs []*unstructured.Unstructured) (map[schema.GroupKind]*apiextensionsv1.CustomResourceDefinition, error) {
	crds := map[schema.GroupKind]*apiextensionsv1.CustomResourceDefinition{}
	for _, o := range objs {
		if o.GroupVersionKind().GroupKind() != apiextensionsv1.Kind("CustomResourceDefinition") {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, crd); err != nil {
			return nil, fmt.Errorf("reading CustomResourceDefinition %s: %w", o.GetName(), err)
		}
		crds[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = crd
	}
	return crds, nil
}

func roleRefKey(namespace, kind, name string) string {
	if kind == "ClusterRole" {
		namespace = ""
	}
	return kind + "/" + namespace + "/" + name
}

func atomicCount(r rbacv1.PolicyRule) int {
	n := len(r.APIGroups) * len(r.Resources) * max(len(r.ResourceNames), 1) * len(r.Verbs)
	return n + len(r.NonResourceURLs)*len(r.Verbs)
}

func describe(o *unstructured.Unstructured) string {
	if ns := o.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", o.GetKind(), ns, o.GetName())
	}
	return fmt.Sprintf("%s %s", o.GetKind(), o.GetName())
}
