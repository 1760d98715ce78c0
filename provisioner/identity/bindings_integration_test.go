package identity

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rukpak-dev/rukpak/internal/heapwatch"
	"github.com/rukpak-dev/rukpak/internal/liststream"
	"github.com/rukpak-dev/rukpak/internal/testenv"
)

// The escalation check reads every RoleBinding of a namespace it grants
// in, and whoever may create RoleBindings there decides how large they
// are: 60 of ~1 MiB each (11,000 subjects) beside the identity's own are
// streamed one at a time, within 64 MiB of live heap, and the rules the
// identity holds through its binding are still found. Reading them in
// pages of 500 whole bindings (as before) held all of them at once.
func TestIntegrationEscalationCheckLargeBindings(t *testing.T) {
	env := testenv.Pooled(t)
	ctx := context.Background()
	for _, o := range objects(t, `apiVersion: v1
kind: Namespace
metadata: {name: big}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: big-apply}
rules:
- {apiGroups: [rbac.authorization.k8s.io], resources: [roles], verbs: [create, delete, get, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: big-pods}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get, list, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: big-apply}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: big-apply}
subjects: [{kind: ServiceAccount, name: plain, namespace: big}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: mine, namespace: big}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: big-pods}
subjects: [{kind: ServiceAccount, name: plain, namespace: big}]`) {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	var g errgroup.Group
	g.SetLimit(4)
	for i := range 60 {
		g.Go(func() error {
			b := &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("large-%02d", i), Namespace: "big"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "big-pods"},
			}
			for j := range 11000 {
				b.Subjects = append(b.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName,
					Name: fmt.Sprintf("user-%02d-%05d-%s", i, j, strings.Repeat("u", 40))})
			}
			return env.Client.Create(ctx, b)
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}

	clients, err := NewClients(env.Config, env.Client.RESTMapper(), 0)
	if err != nil {
		t.Fatal(err)
	}
	id := ServiceAccount{Namespace: "big", Name: "plain"}
	as, err := clients.For(id)
	if err != nil {
		t.Fatal(err)
	}
	lists, err := liststream.New(env.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A Role granting what the identity holds through "mine" only.
	role := `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pods, namespace: big}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get, list, delete]}`
	for _, tc := range []struct {
		name    string
		checker *Checker
		bound   bool
	}{
		{"streamed", &Checker{Mapper: env.Client.RESTMapper(), RBAC: env.Client, Lists: lists}, true},
		{"pages of whole bindings", &Checker{Mapper: env.Client.RESTMapper(), RBAC: env.Client}, false},
	} {
		var missing []Rule
		peak, allocs, took := heapwatch.Measure(func() {
			missing, err = tc.checker.Missing(ctx, id, as, objects(t, role))
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: live heap +%.1f MiB peak, %.0f MiB allocated, %s", tc.name, float64(peak)/(1<<20), float64(allocs)/(1<<20), took.Round(100*time.Millisecond))
		if len(missing) != 0 {
			t.Errorf("%s: missing %s", tc.name, Format(missing, 1<<20))
		}
		if tc.bound && peak > 64<<20 {
			t.Errorf("%s: live heap grew by %d MiB, more than 64 MiB", tc.name, peak>>20)
		}
	}
}
