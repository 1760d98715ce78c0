// Package crdaccess keeps one ClusterRole granting list on exactly the
// resources of the CRDs that releases own (labelled
// core.rukpak.io/owner-kind=BundleDeployment), for the webhook's check of
// hand edits of those CRDs: it validates their stored objects, which
// takes list on them, and the webhook is otherwise granted no custom
// resource at all. The shipped ClusterRoleBinding of the same name binds
// it to the webhook's ServiceAccount.
//
// The provisioner writes it because it is already admin-equivalent and
// sees every CRD a release installs; granting the webhook list on every
// kind instead would let it read every custom resource of the cluster.
// Every instance of a sharded install keeps the same role: each computes
// it from all release-owned CRDs, whichever shard installed them, so they
// write the same rules.
package crdaccess

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

// settle is how long after a change of the release-owned CRDs (or of the
// role) the role is brought up to date; while they keep changing, it is
// brought up to date at most once per pace. Each time costs a read of
// every release-owned CRD's name and a write of a role naming them all,
// so that a fleet's install, which creates hundreds of CRDs over a
// minute, wrote that role once per second, growing (quadratic in the
// CRDs: 0.7 bytes allocated per byte of the fleet's content).
const (
	settle = time.Second
	pace   = 5 * time.Second
)

// FieldManager owns the ClusterRole's rules.
const FieldManager = "rukpak-provisioner-crd-check"

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// Setup keeps ClusterRole name current. The metadata of release-owned
// CRDs (a CRD's name is its plural and group) comes from installed, the
// cache of installed objects the BundleDeployment reconcilers share
// (labelled as owned, which every CRD of a release is), or from a cache
// of its own when installed is nil; the ClusterRole itself from a cache of
// its own, so a deleted or edited role is written again.
func Setup(mgr ctrl.Manager, name string, installed cache.Cache) error {
	crds := &metav1.PartialObjectMetadata{}
	crds.SetGroupVersionKind(crdGVK)
	byObject := map[client.Object]cache.ByObject{
		&rbacv1.ClusterRole{}: {Field: fields.OneTermEqualSelector("metadata.name", name)},
	}
	if installed == nil {
		owned, err := labels.NewRequirement(rukpakv1alpha1.LabelOwnerKind, selection.Equals, []string{"BundleDeployment"})
		if err != nil {
			return err
		}
		byObject[crds] = cache.ByObject{Label: labels.NewSelector().Add(*owned)}
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:     mgr.GetScheme(),
		Mapper:     mgr.GetRESTMapper(),
		HTTPClient: mgr.GetHTTPClient(),
		ByObject:   byObject,
		// Names are all it reads of the CRDs.
		DefaultTransform: func(in any) (any, error) {
			if m, ok := in.(*metav1.PartialObjectMetadata); ok {
				out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta}
				out.Name, out.ResourceVersion = m.Name, m.ResourceVersion
				return out, nil
			}
			return in, nil
		},
	})
	if err != nil {
		return fmt.Errorf("creating the cache of release-owned CRDs: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return err
	}
	crdCache := c
	if installed != nil {
		crdCache = installed
	}
	// The one request, a moment after any event, and no sooner than pace
	// after the last: a fleet's install creates hundreds of CRDs within
	// seconds, and the role is written once per burst, or per pace while
	// it lasts, rather than once per CRD (the queue keeps one request, the
	// earliest, however many are added meanwhile).
	req := reconcile.Request{NamespacedName: client.ObjectKey{Name: name}}
	r := &Reconciler{CRDs: crdCache, Roles: c, Writer: mgr.GetClient(), Name: name}
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		q.AddAfter(req, r.paced.delay(time.Now()))
	}
	one := handler.Funcs{
		CreateFunc: func(_ context.Context, _ event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
		UpdateFunc: func(_ context.Context, _ event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
		DeleteFunc: func(_ context.Context, _ event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
		GenericFunc: func(_ context.Context, _ event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
	}
	// A CRD's name never changes: only its creation and deletion (or the
	// loss of the owner label, which the label-selected cache sees as a
	// deletion) change the rules, not the updates of its status that an
	// install's CRDs each make several of.
	namesOnly := predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
	return ctrl.NewControllerManagedBy(mgr).
		Named("crd-check-access").
		WatchesRawSource(source.Kind(crdCache, client.Object(crds), one, namesOnly)).
		WatchesRawSource(source.Kind(c, client.Object(&rbacv1.ClusterRole{}), one)).
		Complete(r)
}

// pacer spaces the reconciles of a burst of changes.
type pacer struct {
	mu   sync.Mutex
	last time.Time // the last reconcile's start
}

// delay is how long after now a change is reconciled: settle, or later if
// the last reconcile started less than pace before that.
func (p *pacer) delay(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(settle, p.last.Add(pace).Sub(now))
}

func (p *pacer) started(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = now
}

// Reconciler writes the ClusterRole when its rules differ from those the
// release-owned CRDs call for.
type Reconciler struct {
	// CRDs holds the metadata of release-owned CRDs (and maybe other
	// objects: only CRDs are listed); Roles the ClusterRole.
	CRDs   client.Reader
	Roles  client.Reader
	Writer client.Writer
	Name   string

	paced pacer
}

func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	r.paced.started(time.Now())
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(crdGVK.GroupVersion().WithKind("CustomResourceDefinitionList"))
	// Names are all it reads: no copy of every CRD's metadata, on each of
	// the many CRD events of a fleet's install.
	if err := r.CRDs.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing release-owned CRDs: %w", err)
	}
	names := make([]string, 0, len(list.Items))
	for _, crd := range list.Items {
		names = append(names, crd.Name)
	}
	want := Rules(names)
	live := &rbacv1.ClusterRole{}
	err := r.Roles.Get(ctx, client.ObjectKey{Name: r.Name}, live)
	if err == nil && live.AggregationRule == nil && sameRules(live.Rules, want) {
		return reconcile.Result{}, nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	role := rbacv1ac.ClusterRole(r.Name).
		WithLabels(map[string]string{"app.kubernetes.io/part-of": "rukpak"}).
		WithAnnotations(map[string]string{"kubernetes.io/description": "Written by the rukpak provisioner: list on the resources of every CRD a BundleDeployment owns, for the webhook's check of hand edits of those CRDs."})
	// Always the field, empty or not: the apply owns the whole list.
	role.Rules = []rbacv1ac.PolicyRuleApplyConfiguration{}
	for _, rule := range want {
		role.WithRules(rbacv1ac.PolicyRule().WithAPIGroups(rule.APIGroups...).WithResources(rule.Resources...).WithVerbs(rule.Verbs...))
	}
	if err := r.Writer.Apply(ctx, role, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return reconcile.Result{}, fmt.Errorf("writing ClusterRole %s: %w", r.Name, err)
	}
	return reconcile.Result{}, nil
}

// sameRules compares the fields Rules sets (reflection-based equality cost
// more than the rest of a reconcile).
func sameRules(a, b []rbacv1.PolicyRule) bool {
	return slices.EqualFunc(a, b, func(x, y rbacv1.PolicyRule) bool {
		return slices.Equal(x.APIGroups, y.APIGroups) && slices.Equal(x.Resources, y.Resources) && slices.Equal(x.Verbs, y.Verbs) &&
			len(x.ResourceNames) == 0 && len(y.ResourceNames) == 0 && len(x.NonResourceURLs) == 0 && len(y.NonResourceURLs) == 0
	})
}

// Rules grant list on the resources of the named CRDs (PLURAL.GROUP, as
// the API server requires a CRD's name to be), one rule per group, in a
// stable order.
func Rules(crdNames []string) []rbacv1.PolicyRule {
	byGroup := map[string][]string{}
	for _, n := range crdNames {
		plural, group, ok := strings.Cut(n, ".")
		if !ok || plural == "" || group == "" {
			continue
		}
		if !slices.Contains(byGroup[group], plural) {
			byGroup[group] = append(byGroup[group], plural)
		}
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	var rules []rbacv1.PolicyRule
	for _, g := range groups {
		resources := byGroup[g]
		slices.Sort(resources)
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: resources, Verbs: []string{"list"}})
	}
	return rules
}
