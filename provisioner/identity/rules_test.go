package identity

import (
	"fmt"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// builtin maps the kinds the tests use as a cluster would.
func builtin(gvk schema.GroupVersionKind) (string, bool, error) {
	switch gvk.Kind {
	case "Namespace":
		return "namespaces", false, nil
	case "CustomResourceDefinition":
		return "customresourcedefinitions", false, nil
	case "ClusterRole":
		return "clusterroles", false, nil
	case "ClusterRoleBinding":
		return "clusterrolebindings", false, nil
	case "Role", "RoleBinding", "ConfigMap", "Deployment", "ServiceAccount":
		return strings.ToLower(gvk.Kind) + "s", true, nil
	}
	return "", false, &meta.NoKindMatchError{GroupKind: gvk.GroupKind()}
}

func objects(t *testing.T, docs string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, d := range strings.Split(docs, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	return objs
}

const bundle = `apiVersion: v1
kind: Namespace
metadata: {name: other}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, kind: Widget}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: app}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: a, namespace: app}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: b, namespace: app}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: reader}
rules:
- {apiGroups: [""], resources: [pods, configmaps], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader, namespace: app}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: reader}
subjects: [{kind: ServiceAccount, name: op, namespace: app}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: viewer, namespace: app}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{kind: ServiceAccount, name: op, namespace: app}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: aggregated}
aggregationRule:
  clusterRoleSelectors: [{matchLabels: {a: b}}]
---
apiVersion: unknown.example.com/v1
kind: Gadget
metadata: {name: g, namespace: app}`

func TestRequiredRules(t *testing.T) {
	plan, err := NewPlan(objects(t, bundle), builtin)
	if err != nil {
		t.Fatal(err)
	}
	got := Format(RequiredRules(plan), 1<<20)
	want := `
cluster-wide (ClusterRole):
- {apiGroups: [""], resources: ["configmaps", "pods"], verbs: ["get", "list"]}
- {apiGroups: [""], resources: ["namespaces"], verbs: ["create", "delete", "get", "patch"]}
- {apiGroups: ["apiextensions.k8s.io"], resources: ["customresourcedefinitions"], verbs: ["create", "delete", "get", "patch"]}
- {apiGroups: ["rbac.authorization.k8s.io"], resources: ["clusterroles"], verbs: ["create", "delete", "get", "patch"]}
- {apiGroups: ["rbac.authorization.k8s.io"], resources: ["clusterroles"], resourceNames: ["aggregated"], verbs: ["escalate"]}  # ClusterRole aggregated
in namespace "app" (Role):
- {apiGroups: [""], resources: ["configmaps"], verbs: ["create", "delete", "get", "patch"]}
- {apiGroups: ["example.com"], resources: ["widgets"], verbs: ["create", "delete", "get", "patch"]}
- {apiGroups: ["rbac.authorization.k8s.io"], resources: ["rolebindings"], verbs: ["create", "delete", "get", "patch"]}
- {apiGroups: ["rbac.authorization.k8s.io"], resources: ["clusterroles"], resourceNames: ["view"], verbs: ["bind"]}  # RoleBinding app/viewer`
	if got != want {
		t.Errorf("got:%s\nwant:%s", got, want)
	}
}

func TestRequiredRulesCreatedNamespace(t *testing.T) {
	plan, err := NewPlan(objects(t, `apiVersion: v1
kind: Namespace
metadata: {name: new}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: a, namespace: new}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: a, namespace: old}`), builtin)
	if err != nil {
		t.Fatal(err)
	}
	got := Format(RequiredRules(plan), 1<<20)
	want := `
cluster-wide (ClusterRole):
- {apiGroups: [""], resources: ["configmaps", "namespaces"], verbs: ["create", "delete", "get", "patch"]}`
	if got != want {
		t.Errorf("got:%s\nwant:%s", got, want)
	}
}

func TestFormatBounded(t *testing.T) {
	var rules []Rule
	for i := range 100 {
		rules = append(rules, Rule{Namespace: "ns", PolicyRule: rbacv1.PolicyRule{
			APIGroups: []string{"g"}, Resources: []string{fmt.Sprintf("r%03d", i)}, Verbs: []string{"get"},
		}})
	}
	got := Format(rules, 200)
	want := `
in namespace "ns" (Role):
- {apiGroups: ["g"], resources: ["r000"], verbs: ["get"]}
- {apiGroups: ["g"], resources: ["r001"], verbs: ["get"]}
(and 98 more rules)`
	if got != want {
		t.Errorf("got:%s\nwant:%s", got, want)
	}
}

func TestCompact(t *testing.T) {
	rule := func(ns, why string, groups, resources, verbs []string) Rule {
		return Rule{Namespace: ns, Why: why, PolicyRule: rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs}}
	}
	for _, tc := range []struct {
		name string
		in   []Rule
		want string
	}{{
		name: "verbs of one resource merge, then resources with the same verbs",
		in: []Rule{
			rule("a", "", []string{"apps"}, []string{"deployments"}, []string{"patch"}),
			rule("a", "", []string{"apps"}, []string{"deployments"}, []string{"get", "patch"}),
			rule("a", "", []string{"apps"}, []string{"statefulsets"}, []string{"get"}),
			rule("a", "", []string{"apps"}, []string{"statefulsets"}, []string{"patch"}),
		},
		want: `
in namespace "a" (Role):
- {apiGroups: ["apps"], resources: ["deployments", "statefulsets"], verbs: ["get", "patch"]}`,
	}, {
		name: "namespaces and reasons stay apart",
		in: []Rule{
			rule("b", "", []string{""}, []string{"pods"}, []string{"get"}),
			rule("a", "", []string{""}, []string{"pods"}, []string{"get"}),
			rule("a", "Role a/x grants it", []string{""}, []string{"pods"}, []string{"list"}),
		},
		want: `
in namespace "a" (Role):
- {apiGroups: [""], resources: ["pods"], verbs: ["get"]}
- {apiGroups: [""], resources: ["pods"], verbs: ["list"]}  # Role a/x grants it
in namespace "b" (Role):
- {apiGroups: [""], resources: ["pods"], verbs: ["get"]}`,
	}, {
		name: "non-resource URLs",
		in: []Rule{
			{PolicyRule: rbacv1.PolicyRule{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
			{PolicyRule: rbacv1.PolicyRule{NonResourceURLs: []string{"/healthz"}, Verbs: []string{"get"}}},
		},
		want: `
cluster-wide (ClusterRole):
- {nonResourceURLs: ["/healthz", "/metrics"], verbs: ["get"]}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Format(Compact(tc.in), 1<<20); got != tc.want {
				t.Errorf("got:%s\nwant:%s", got, tc.want)
			}
		})
	}
}

func TestPlanBoundsRules(t *testing.T) {
	many := make([]any, 400)
	for i := range many {
		many[i] = fmt.Sprintf("x%d", i)
	}
	role := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": "big"},
		"rules": []any{map[string]any{"apiGroups": many, "resources": many, "verbs": []any{"get"}}},
	}}
	_, err := NewPlan([]*unstructured.Unstructured{role}, builtin)
	if want := "the bundle's Roles and ClusterRoles grant more than 100000 single-verb rules, more than the escalation check is run on"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

func TestPolicy(t *testing.T) {
	def := &ServiceAccount{Namespace: "rukpak-system", Name: "installer"}
	named := &rukpakv1alpha1.BundleDeployment{Spec: rukpakv1alpha1.BundleDeploymentSpec{ServiceAccount: &rukpakv1alpha1.ServiceAccountReference{Namespace: "t", Name: "sa"}}}
	unnamed := &rukpakv1alpha1.BundleDeployment{}
	for _, tc := range []struct {
		name   string
		policy Policy
		bd     *rukpakv1alpha1.BundleDeployment
		want   string
	}{
		{"named wins over default", Policy{Default: def, Required: true}, named, "t/sa"},
		{"default", Policy{Default: def}, unnamed, "rukpak-system/installer"},
		{"provisioner's own", Policy{}, unnamed, "own"},
		{"required", Policy{Required: true}, unnamed, "error: " + ErrRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sa, ok, err := tc.policy.For(tc.bd)
			got := "own"
			switch {
			case err != nil:
				got = "error: " + err.Error()
			case ok:
				got = sa.String()
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]string{
		"ns/name":      "ns/name",
		"ns/a.b":       "ns/a.b",
		"name":         `service account "name": want NAMESPACE/NAME`,
		"/name":        `service account "/name": want NAMESPACE/NAME`,
		"Ns/name":      `service account "Ns/name": namespace: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
		"ns/name/more": `service account "ns/name/more": name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
	} {
		sa, err := Parse(in)
		got := sa.String()
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("Parse(%q) = %q, want %q", in, got, want)
		}
	}
}
