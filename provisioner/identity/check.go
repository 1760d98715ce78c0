package identity

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/component-helpers/auth/rbac/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/internal/liststream"
)

// reviewConcurrency bounds the access reviews in flight for one check.
const reviewConcurrency = 8

// rbacPage is the page size of the binding lists the escalation check
// reads.
const rbacPage = 500

// fullAuthority is what creating a ClusterRole with an aggregationRule
// takes (the API server's own rule): it may gather any permission.
var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

// Checker finds the rules an identity lacks to install a bundle.
type Checker struct {
	// Mapper maps the bundle's kinds to resources and scopes.
	Mapper meta.RESTMapper
	// RBAC reads Roles, ClusterRoles and their bindings with the
	// provisioner's own rights, uncached: the escalation check, as the API
	// server's, compares RBAC rules, not authorizer answers.
	RBAC client.Reader
	// Lists, when set, streams the binding lists one binding at a time:
	// whoever may create RoleBindings in a namespace decides how large
	// they are (up to the API server's limit each), so a page of them is
	// not held whole. Without it they are read through RBAC, in pages.
	Lists *liststream.Client
}

// Missing returns the rules sa lacks to install objs, compacted; none
// means the install may go ahead. as is a client impersonating sa: access
// reviews go through it as SelfSubjectAccessReviews, so they are answered
// for exactly the identity the install uses, by every authorizer the API
// server has. Each resource, namespace and verb is reviewed once (first
// cluster-wide, then in the namespace if that is refused), not per object.
func (c *Checker) Missing(ctx context.Context, sa ServiceAccount, as client.Client, objs []*unstructured.Unstructured) ([]Rule, error) {
	plan, err := NewPlan(objs, c.mapping)
	if err != nil {
		return nil, err
	}
	rv := &reviewer{client: as, answers: map[authorizationv1.ResourceAttributes]bool{}}
	var missing []Rule
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(reviewConcurrency)
	for _, r := range plan.Resources {
		for _, verb := range r.Verbs() {
			g.Go(func() error {
				ok, err := rv.allowed(gctx, authorizationv1.ResourceAttributes{Verb: verb, Group: r.Group, Resource: r.Resource})
				if err != nil || ok {
					return err
				}
				if r.Namespace != "" {
					ok, err = rv.allowed(gctx, authorizationv1.ResourceAttributes{Verb: verb, Group: r.Group, Resource: r.Resource, Namespace: r.Namespace})
					if err != nil || ok {
						return err
					}
				}
				mu.Lock()
				defer mu.Unlock()
				missing = append(missing, Rule{Namespace: r.Namespace, PolicyRule: rbacv1.PolicyRule{
					APIGroups: []string{r.Group}, Resources: []string{r.Resource}, Verbs: []string{verb},
				}})
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if len(plan.Grants) > 0 {
		owner := &ownerRules{sa: sa, reader: c.RBAC, lists: c.Lists, byNamespace: map[string][]rbacv1.PolicyRule{}}
		for _, grant := range plan.Grants {
			m, err := c.grantMissing(ctx, rv, owner, grant)
			if err != nil {
				return nil, err
			}
			missing = append(missing, m...)
		}
	}
	for ns := range plan.Namespaces {
		err := c.RBAC.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		switch {
		case err == nil:
			// It exists: Roles can be bound there already.
			delete(plan.Namespaces, ns)
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading namespace %s: %w", ns, err)
		}
	}
	return Compact(plan.hoist(missing)), nil
}

// grantMissing is what sa lacks for the API server to let it create
// grant's object: nothing if the alternative (escalate, bind) is allowed,
// else the rules it grants that sa does not hold where it grants them.
func (c *Checker) grantMissing(ctx context.Context, rv *reviewer, owner *ownerRules, g Grant) ([]Rule, error) {
	if ok, err := rv.allowed(ctx, g.Alternative); err != nil || ok {
		return nil, err
	}
	rules := g.Rules
	why := fmt.Sprintf("%s grants it (or: %s on it)", g.Object, g.Alternative.Verb)
	if g.RoleRef != nil {
		why = fmt.Sprintf("%s binds %s %s, which grants it (or: bind on it)", g.Object, g.RoleRef.Kind, g.RoleRef.Name)
	}
	if g.RoleRef != nil && rules == nil {
		var err error
		rules, err = c.roleRules(ctx, g.Namespace, *g.RoleRef)
		if apierrors.IsNotFound(err) {
			// The API server refuses binding a missing role without bind.
			return []Rule{alternativeRule(g)}, nil
		}
		if err != nil {
			return nil, err
		}
	}
	held, err := owner.rules(ctx, g.Namespace)
	if err != nil {
		return nil, err
	}
	if g.FullAuthority {
		if ok, _ := validation.Covers(held, fullAuthority); !ok {
			return []Rule{alternativeRule(g)}, nil
		}
	}
	var missing []Rule
	if ok, uncovered := validation.Covers(held, rules); !ok {
		for _, r := range uncovered {
			missing = append(missing, Rule{Namespace: g.Namespace, PolicyRule: r, Why: why})
		}
	}
	return missing, nil
}

// roleRules reads the rules of a role the bundle binds but does not have.
func (c *Checker) roleRules(ctx context.Context, namespace string, ref rbacv1.RoleRef) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "ClusterRole":
		r := &rbacv1.ClusterRole{}
		if err := c.RBAC.Get(ctx, client.ObjectKey{Name: ref.Name}, r); err != nil {
			return nil, fmt.Errorf("reading ClusterRole %s: %w", ref.Name, err)
		}
		return r.Rules, nil
	case "Role":
		r := &rbacv1.Role{}
		if err := c.RBAC.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, r); err != nil {
			return nil, fmt.Errorf("reading Role %s/%s: %w", namespace, ref.Name, err)
		}
		return r.Rules, nil
	}
	return nil, fmt.Errorf("roleRef kind %q is neither Role nor ClusterRole", ref.Kind)
}

func (c *Checker) mapping(gvk schema.GroupVersionKind) (string, bool, error) {
	m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return "", false, err
	}
	return m.Resource.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// reviewer asks the API server, once per attributes, whether its client's
// identity may do something.
type reviewer struct {
	client  client.Client
	mu      sync.Mutex
	answers map[authorizationv1.ResourceAttributes]bool
}

func (r *reviewer) allowed(ctx context.Context, attrs authorizationv1.ResourceAttributes) (bool, error) {
	r.mu.Lock()
	ok, known := r.answers[attrs]
	r.mu.Unlock()
	if known {
		return ok, nil
	}
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}
	if err := r.client.Create(ctx, review); err != nil {
		return false, fmt.Errorf("reviewing access to %s: %w", describeAttrs(attrs), err)
	}
	r.mu.Lock()
	r.answers[attrs] = review.Status.Allowed
	r.mu.Unlock()
	return review.Status.Allowed, nil
}

func describeAttrs(a authorizationv1.ResourceAttributes) string {
	s := a.Verb + " " + a.Resource
	if a.Group != "" {
		s += "." + a.Group
	}
	if a.Name != "" {
		s += " " + a.Name
	}
	if a.Namespace != "" {
		s += " in namespace " + a.Namespace
	}
	return s
}

// ownerRules are the RBAC rules an identity holds, as the API server's
// escalation check resolves them: the ClusterRoles its ClusterRoleBindings
// bind, plus in a namespace the roles its RoleBindings there bind. Roles
// that do not exist count as none, as there.
type ownerRules struct {
	sa     ServiceAccount
	reader client.Reader
	lists  *liststream.Client

	cluster     []rbacv1.PolicyRule
	clusterRead bool
	byNamespace map[string][]rbacv1.PolicyRule
}

func (o *ownerRules) rules(ctx context.Context, namespace string) ([]rbacv1.PolicyRule, error) {
	if !o.clusterRead {
		refs, err := o.boundRefs(ctx, "")
		if err != nil {
			return nil, err
		}
		for _, ref := range refs {
			rules, err := o.refRules(ctx, "", ref)
			if err != nil {
				return nil, err
			}
			o.cluster = append(o.cluster, rules...)
		}
		o.clusterRead = true
	}
	if namespace == "" {
		return o.cluster, nil
	}
	if rules, ok := o.byNamespace[namespace]; ok {
		return rules, nil
	}
	rules := append([]rbacv1.PolicyRule(nil), o.cluster...)
	refs, err := o.boundRefs(ctx, namespace)
	if err != nil {
		return nil, err
	}
	for _, ref := range refs {
		r, err := o.refRules(ctx, namespace, ref)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r...)
	}
	o.byNamespace[namespace] = rules
	return rules, nil
}

// boundRefs returns the roles the identity's RoleBindings in namespace
// bind ("": its ClusterRoleBindings). Anyone who may create RoleBindings
// in namespace decides how many and how large they are (bindings are as
// large as their subjects): only the references are kept.
func (o *ownerRules) boundRefs(ctx context.Context, namespace string) ([]rbacv1.RoleRef, error) {
	var refs []rbacv1.RoleRef
	if o.lists != nil {
		path := "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
		if namespace != "" {
			path = "/apis/rbac.authorization.k8s.io/v1/namespaces/" + namespace + "/rolebindings"
		}
		seen := 0
		err := o.lists.All(ctx, path, rbacPage, liststream.MaxObjectBytes, func(raw []byte) error {
			if seen++; seen > maxRBACItems {
				return fmt.Errorf("more than %d", maxRBACItems)
			}
			var b struct {
				Subjects []rbacv1.Subject `json:"subjects"`
				RoleRef  rbacv1.RoleRef   `json:"roleRef"`
			}
			if err := json.Unmarshal(raw, &b); err != nil {
				return err
			}
			if o.bound(b.Subjects, namespace) {
				refs = append(refs, b.RoleRef)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing role bindings: %w", err)
		}
		return refs, nil
	}
	// Only the role references of the identity's bindings are kept, not
	// the pages.
	var list client.ObjectList = &rbacv1.ClusterRoleBindingList{}
	var opts []client.ListOption
	if namespace != "" {
		list, opts = &rbacv1.RoleBindingList{}, []client.ListOption{client.InNamespace(namespace)}
	}
	err := listPages(ctx, o.reader, list, func(l client.ObjectList) {
		switch l := l.(type) {
		case *rbacv1.ClusterRoleBindingList:
			for _, b := range l.Items {
				if o.bound(b.Subjects, "") {
					refs = append(refs, b.RoleRef)
				}
			}
		case *rbacv1.RoleBindingList:
			for _, b := range l.Items {
				if o.bound(b.Subjects, namespace) {
					refs = append(refs, b.RoleRef)
				}
			}
		}
	}, opts...)
	return refs, err
}

func (o *ownerRules) refRules(ctx context.Context, namespace string, ref rbacv1.RoleRef) ([]rbacv1.PolicyRule, error) {
	var obj client.Object
	key := client.ObjectKey{Name: ref.Name}
	switch ref.Kind {
	case "ClusterRole":
		obj = &rbacv1.ClusterRole{}
	case "Role":
		obj, key.Namespace = &rbacv1.Role{}, namespace
	default:
		return nil, nil
	}
	if err := o.reader.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s %s: %w", ref.Kind, ref.Name, err)
	}
	if r, ok := obj.(*rbacv1.ClusterRole); ok {
		return r.Rules, nil
	}
	return obj.(*rbacv1.Role).Rules, nil
}

// bound says whether subjects (of a binding in namespace, "" for a
// ClusterRoleBinding) include the identity, as the API server matches them.
func (o *ownerRules) bound(subjects []rbacv1.Subject, namespace string) bool {
	groups := o.sa.Groups()
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			if s.Name == o.sa.Username() {
				return true
			}
		case rbacv1.GroupKind:
			for _, g := range groups {
				if s.Name == g {
					return true
				}
			}
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = namespace
			}
			if ns == o.sa.Namespace && s.Name == o.sa.Name {
				return true
			}
		}
	}
	return false
}

// maxRBACItems bounds the bindings one list reads.
const maxRBACItems = 100_000

func listPages(ctx context.Context, r client.Reader, list client.ObjectList, each func(client.ObjectList), opts ...client.ListOption) error {
	cont := ""
	seen := 0
	for {
		if err := r.List(ctx, list, append(opts, client.Limit(rbacPage), client.Continue(cont))...); err != nil {
			return fmt.Errorf("listing role bindings: %w", err)
		}
		each(list)
		seen += meta.LenList(list)
		if seen > maxRBACItems {
			return fmt.Errorf("listing role bindings: more than %d", maxRBACItems)
		}
		if cont = list.GetContinue(); cont == "" {
			return nil
		}
	}
}
