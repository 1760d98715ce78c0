package identity

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// The escalation rules as the API server applies them, against a real one:
// what the identity holds through its bindings covers a role's rules;
// escalate and bind stand in for them; an aggregated ClusterRole needs
// every permission or escalate; a binding of a role that exists nowhere
// needs bind. Each case's identity may apply every object already, so
// only the escalation rules can be missing.
func TestMissingEscalation(t *testing.T) {
	env := testenv.Pooled(t)
	ctx := context.Background()
	for _, o := range objects(t, `apiVersion: v1
kind: Namespace
metadata: {name: esc}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: esc-apply}
rules:
- {apiGroups: ["", rbac.authorization.k8s.io], resources: [configmaps, roles, rolebindings, clusterroles, clusterrolebindings], verbs: [create, delete, get, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: esc-escalate}
rules:
- {apiGroups: [rbac.authorization.k8s.io], resources: [roles, clusterroles], verbs: [escalate]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: esc-bind}
rules:
- {apiGroups: [rbac.authorization.k8s.io], resources: [clusterroles], resourceNames: [missing], verbs: [bind]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: esc-pods-reader}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: pods-reader, namespace: esc}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: esc-pods-reader}
subjects: [{kind: Group, name: "system:serviceaccounts:esc"}]`) {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	bind := func(sa string, roles ...string) {
		for _, r := range roles {
			for _, o := range objects(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: `+sa+`-`+r+`}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: `+r+`}
subjects: [{kind: ServiceAccount, name: `+sa+`, namespace: esc}]`) {
				if err := env.Client.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	bind("plain", "esc-apply")
	bind("escalator", "esc-apply", "esc-escalate")
	bind("binder", "esc-apply", "esc-bind")

	clients, err := NewClients(env.Config, env.Client.RESTMapper(), 0)
	if err != nil {
		t.Fatal(err)
	}
	checker := &Checker{Mapper: env.Client.RESTMapper(), RBAC: env.Client}
	missing := func(sa, docs string) string {
		t.Helper()
		id := ServiceAccount{Namespace: "esc", Name: sa}
		as, err := clients.For(id)
		if err != nil {
			t.Fatal(err)
		}
		rules, err := checker.Missing(ctx, id, as, objects(t, docs))
		if err != nil {
			t.Fatal(err)
		}
		return Format(rules, 1<<20)
	}
	const podsRole = `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pods, namespace: esc}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get, list]}
- {apiGroups: [""], resources: [pods], verbs: [delete]}`
	const aggregated = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: esc-aggregated}
aggregationRule:
  clusterRoleSelectors: [{matchLabels: {esc: "true"}}]`
	const bindsMissing = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: esc-missing}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: missing}
subjects: [{kind: ServiceAccount, name: x, namespace: esc}]`
	for _, tc := range []struct {
		name, sa, docs, want string
	}{{
		name: "rules held through a binding in the namespace (of the ServiceAccounts' group) are not missing",
		sa:   "plain", docs: podsRole,
		want: `
in namespace "esc" (Role):
- {apiGroups: [""], resources: ["pods"], verbs: ["delete"]}  # Role esc/pods grants it (or: escalate on it)`,
	}, {
		name: "escalate stands in for the rules",
		sa:   "escalator", docs: podsRole,
	}, {
		name: "an aggregated ClusterRole needs every permission or escalate",
		sa:   "plain", docs: aggregated,
		want: `
cluster-wide (ClusterRole):
- {apiGroups: ["rbac.authorization.k8s.io"], resources: ["clusterroles"], resourceNames: ["esc-aggregated"], verbs: ["escalate"]}  # ClusterRole esc-aggregated`,
	}, {
		name: "escalate allows an aggregated ClusterRole",
		sa:   "escalator", docs: aggregated,
	}, {
		name: "binding a role that exists nowhere needs bind",
		sa:   "plain", docs: bindsMissing,
		want: `
cluster-wide (ClusterRole):
- {apiGroups: ["rbac.authorization.k8s.io"], resources: ["clusterroles"], resourceNames: ["missing"], verbs: ["bind"]}  # ClusterRoleBinding esc-missing`,
	}, {
		name: "bind on the role allows it",
		sa:   "binder", docs: bindsMissing,
	}, {
		name: "binding an existing role needs its rules where it is bound",
		sa:   "plain", docs: `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: esc-bind-view, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: esc-escalate}
subjects: [{kind: ServiceAccount, name: x, namespace: esc}]`,
		want: `
in namespace "default" (Role):
- {apiGroups: ["rbac.authorization.k8s.io"], resources: ["clusterroles", "roles"], verbs: ["escalate"]}  # RoleBinding default/esc-bind-view binds ClusterRole esc-escalate, which grants it (or: bind on it)`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := missing(tc.sa, tc.docs); got != tc.want {
				t.Errorf("missing:%s\nwant:%s", got, tc.want)
			}
			// The API server agrees: a dry-run create as the identity
			// passes exactly when nothing is missing.
			as, err := clients.For(ServiceAccount{Namespace: "esc", Name: tc.sa})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objects(t, tc.docs) {
				err := as.Create(ctx, o, client.DryRunAll)
				if (err == nil) != (tc.want == "") {
					t.Errorf("dry-run create of %s %s as %s: %v", o.GetKind(), o.GetName(), tc.sa, err)
				}
			}
		})
	}
}
