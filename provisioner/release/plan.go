package release

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/internal/sortedkeys"
)

// Plan is what applying a new set of objects as a release would do to the
// cluster, found without changing anything: each object that exists is
// applied with a server-side dry run, and its answer compared with the
// live object, so defaulting, admission and other field managers are
// accounted for as the real apply would meet them.
type Plan struct {
	// Revision is the deployed release revision the objects to delete are
	// read from; 0 when the release is not installed.
	Revision int
	// Create lists the objects that do not exist yet ("Kind ns/name").
	Create []string
	// Change lists the existing objects the apply would change.
	Change []ObjectChange
	// Delete lists the objects of the deployed revision that the new
	// objects no longer hold and the release still owns.
	Delete []string
	// Refused lists the objects the apply would fail on, with why: they
	// exist and are not the release's, or the dry run was refused.
	Refused []string
	// Unchanged counts the existing objects the apply would leave as they
	// are.
	Unchanged int
	// Hooks lists the hooks the install would run (the helm class's), not
	// part of the release: "Kind ns/name (pre-upgrade)".
	Hooks []string
}

// ObjectChange is one object a plan changes.
type ObjectChange struct {
	// Object is "Kind ns/name" (or "Kind name").
	Object string
	// Fields are the paths of the changed fields, at most MaxPlanFields
	// (see More): "spec.replicas",
	// "spec.template.spec.containers[name=manager].image".
	Fields []string
	// More counts the changed fields not listed.
	More int
}

// MaxPlanFields bounds the field paths listed per changed object.
const MaxPlanFields = 20

// Plan says what Apply(ctx, name, objs, mutate) would do now, with
// server-side dry runs. It writes nothing, not even the recovery of a
// release record left pending, so it is safe to run beside a provisioner
// (rukpakctl diff).
func (m *Manager) Plan(ctx context.Context, name string, objs []*unstructured.Unstructured, mutate func(*unstructured.Unstructured)) (*Plan, error) {
	stamped, err := m.stamp(name, objs, mutate)
	if err != nil {
		return nil, err
	}
	return m.plan(ctx, name, m.namespace, stamped)
}

// PlanStamped is Plan for objects already stamped and placed as release
// name's whose ownership annotations name releaseNamespace: the helm
// class's, whose post-renderer stamps them and whose release namespace is
// the install namespace.
func (m *Manager) PlanStamped(ctx context.Context, name, releaseNamespace string, stamped []*unstructured.Unstructured) (*Plan, error) {
	return m.plan(ctx, name, releaseNamespace, stamped)
}

func (m *Manager) plan(ctx context.Context, name, releaseNamespace string, stamped []*unstructured.Unstructured) (*Plan, error) {
	deployed, err := m.deployed(name)
	if err != nil {
		return nil, err
	}
	p := &Plan{}
	var previous []*unstructured.Unstructured
	if deployed != nil {
		p.Revision = deployed.Version
		if previous, err = decodeManifest(deployed.Manifest); err != nil {
			return nil, err
		}
		// Fields the deployed objects were applied without would be left
		// out again: they are no change.
		stamped = carryDrops(stamped, previous)
	}

	var mu sync.Mutex
	err = parallel(stamped, func(o *unstructured.Unstructured) error {
		verdict, change, err := m.planObject(ctx, name, releaseNamespace, o)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		switch verdict {
		case planCreate:
			p.Create = append(p.Create, describe(o))
		case planChange:
			p.Change = append(p.Change, change)
		case planRefuse:
			p.Refused = append(p.Refused, change.Object)
		default:
			p.Unchanged++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	wanted := map[string]bool{}
	for _, o := range stamped {
		wanted[key(o)] = true
	}
	var stale []*unstructured.Unstructured
	for _, o := range previous {
		if !wanted[key(o)] {
			stale = append(stale, o)
		}
	}
	err = parallel(stale, func(o *unstructured.Unstructured) error {
		live, err := m.Live(ctx, o)
		if err != nil {
			return fmt.Errorf("reading %s: %w", describe(o), err)
		}
		if live != nil && live.DeletionTimestamp.IsZero() && ownedBy(live, name, releaseNamespace) {
			mu.Lock()
			p.Delete = append(p.Delete, describe(o))
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(p.Create)
	sort.Strings(p.Delete)
	sort.Strings(p.Refused)
	sort.Slice(p.Change, func(i, j int) bool { return p.Change[i].Object < p.Change[j].Object })
	return p, nil
}

type planVerdict int

const (
	planUnchanged planVerdict = iota
	planCreate
	planChange
	planRefuse
)

// planObject dry-runs the apply of one stamped object. A refusal comes back
// as planRefuse with the reason in change.Object.
func (m *Manager) planObject(ctx context.Context, name, releaseNamespace string, o *unstructured.Unstructured) (planVerdict, ObjectChange, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(o.GroupVersionKind())
	err := m.client.Get(ctx, client.ObjectKeyFromObject(o), live)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		// A kind the new objects bring their CRD for cannot be mapped yet.
		return planCreate, ObjectChange{}, nil
	case err != nil:
		return 0, ObjectChange{}, fmt.Errorf("reading %s: %w", describe(o), err)
	case !ownedBy(live, name, releaseNamespace):
		why := "it exists and is not managed by this release"
		if ns, other := Owner(live); other != "" {
			why += fmt.Sprintf(" (it is owned by release %s/%s)", ns, other)
		}
		return planRefuse, ObjectChange{Object: describe(o) + ": " + why}, nil
	}
	answer, err := dryRunApply(ctx, m.client, o)
	if err != nil {
		return planRefuse, ObjectChange{Object: describe(o) + ": the dry-run apply was refused: " + err.Error()}, nil
	}
	fields, more := ChangedFields(live.Object, answer.Object, MaxPlanFields)
	if len(fields) == 0 {
		return planUnchanged, ObjectChange{}, nil
	}
	return planChange, ObjectChange{Object: describe(o), Fields: fields, More: more}, nil
}

// dryRunApply is ApplyObject as a server-side dry run, returning the object
// the API server would store.
func dryRunApply(ctx context.Context, c client.Client, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	patch, err := json.Marshal(o.Object)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", describe(o), err)
	}
	answer := &unstructured.Unstructured{}
	answer.SetGroupVersionKind(o.GroupVersionKind())
	answer.SetNamespace(o.GetNamespace())
	answer.SetName(o.GetName())
	err = c.Patch(ctx, answer, client.RawPatch(types.ApplyPatchType, patch), client.DryRunAll,
		client.FieldOwner(FieldManager), client.ForceOwnership, client.FieldValidation(metav1.FieldValidationIgnore))
	if err != nil {
		return nil, err
	}
	return answer, nil
}

// stamp returns copies of objs as a release applies them: mutated, with
// the release's ownership metadata, and placed.
func (m *Manager) stamp(name string, objs []*unstructured.Unstructured, mutate func(*unstructured.Unstructured)) ([]*unstructured.Unstructured, error) {
	copies := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		copies[i] = o.DeepCopy()
	}
	return m.stampInPlace(name, copies, mutate)
}

// stampInPlace is stamp of objects the caller gives away: objs
// themselves are stamped and returned (in a new slice).
func (m *Manager) stampInPlace(name string, objs []*unstructured.Unstructured, mutate func(*unstructured.Unstructured)) ([]*unstructured.Unstructured, error) {
	stamped := make([]*unstructured.Unstructured, 0, len(objs))
	// The scope of each kind, asked once per kind: the RESTMapper's answer
	// allocated ~5 KB a call, a tenth of a restart's work at 10,000
	// releases of 10 ConfigMaps.
	scopes := map[schema.GroupVersionKind]scope{}
	for _, o := range objs {
		if mutate != nil {
			mutate(o)
		}
		m.ownershipMetadata(o, name)
		if err := m.place(o, scopes); err != nil {
			return nil, err
		}
		stamped = append(stamped, o)
	}
	return stamped, nil
}

// deployed reads the release's deployed revision without writing anything;
// nil if there is none.
func (m *Manager) deployed(name string) (*helmrelease.Release, error) {
	all, err := m.store.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading release %q: %w", name, err)
	}
	var deployed *helmrelease.Release
	for _, r := range all {
		if r.Info.Status == helmrelease.StatusDeployed && (deployed == nil || r.Version > deployed.Version) {
			deployed = r
		}
	}
	return deployed, nil
}

// ignoredFields are written by the API server on every write, or are not
// the apply's to change: never a change a plan reports.
var ignoredFields = map[string]bool{
	"metadata.managedFields":     true,
	"metadata.resourceVersion":   true,
	"metadata.generation":        true,
	"metadata.creationTimestamp": true,
	"metadata.uid":               true,
	"status":                     true,
}

// diffSteps bounds the work of comparing one object: a hostile object
// could be deep or wide.
const diffSteps = 100_000

// ChangedFields lists the paths where after differs from before, at most
// limit of them (more counts the rest), in a stable order. Lists whose
// items all have a distinct "name" are matched by name
// ("containers[name=manager]"), others by index; a list that changes
// length is one change.
func ChangedFields(before, after map[string]any, limit int) (fields []string, more int) {
	d := &differ{steps: diffSteps, limit: limit}
	d.diff("", before, after)
	if d.steps < 0 {
		// Out of budget: say so rather than list part of the truth as all.
		d.add("(comparison stopped: the object is too large to compare)")
	}
	return d.fields, d.more
}

type differ struct {
	steps  int
	limit  int
	fields []string
	more   int
}

func (d *differ) add(path string) {
	if len(d.fields) < d.limit {
		d.fields = append(d.fields, path)
		return
	}
	d.more++
}

func (d *differ) diff(path string, a, b any) {
	if d.steps--; d.steps < 0 || ignoredFields[path] {
		return
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			d.add(orRoot(path))
			return
		}
		for _, k := range sortedkeys.Union(av, bv) {
			if d.steps < 0 {
				return
			}
			p := k
			if path != "" {
				p = path + "." + k
			}
			x, inA := av[k]
			y, inB := bv[k]
			if !inA || !inB {
				if !ignoredFields[p] {
					d.add(p)
				}
				continue
			}
			d.diff(p, x, y)
		}
	case []any:
		bv, ok := b.([]any)
		if !ok {
			d.add(orRoot(path))
			return
		}
		if an, bn := names(av), names(bv); an != nil && bn != nil {
			d.diffNamed(path, av, bv, an, bn)
			return
		}
		if len(av) != len(bv) {
			d.add(orRoot(path))
			return
		}
		for i := range av {
			d.diff(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i])
		}
	default:
		if !reflect.DeepEqual(a, b) {
			d.add(orRoot(path))
		}
	}
}

// diffNamed compares lists of named items by name.
func (d *differ) diffNamed(path string, a, b []any, an, bn []string) {
	all := slices.Clone(an)
	for _, n := range bn {
		if !slices.Contains(an, n) {
			all = append(all, n)
		}
	}
	for _, n := range all {
		p := fmt.Sprintf("%s[name=%s]", path, n)
		i, j := slices.Index(an, n), slices.Index(bn, n)
		if i < 0 || j < 0 {
			d.add(p)
			continue
		}
		d.diff(p, a[i], b[j])
	}
	if slices.Equal(sortedCopy(an), sortedCopy(bn)) && !slices.Equal(an, bn) {
		d.add(path + " (order)")
	}
}

// names returns the "name" of every item of list if each is a map with a
// distinct string name; nil otherwise.
func names(list []any) []string {
	if len(list) == 0 {
		return nil
	}
	out := make([]string, 0, len(list))
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil
		}
		n, ok := m["name"].(string)
		if !ok || slices.Contains(out, n) {
			return nil
		}
		out = append(out, n)
	}
	return out
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	sort.Strings(c)
	return c
}

func orRoot(path string) string {
	if path == "" {
		return "(the whole object)"
	}
	return path
}

// Summary is the plan in one line for a condition or event: counts, then
// up to maxObjects objects of each kind of change.
func (p *Plan) Summary(maxObjects int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d to create, %d to change, %d to delete, %d unchanged", len(p.Create), len(p.Change), len(p.Delete), p.Unchanged)
	if len(p.Refused) > 0 {
		fmt.Fprintf(&b, ", %d refused", len(p.Refused))
	}
	list := func(verb string, items []string) {
		if len(items) == 0 {
			return
		}
		fmt.Fprintf(&b, "; %s %s", verb, strings.Join(items[:min(len(items), maxObjects)], ", "))
		if len(items) > maxObjects {
			fmt.Fprintf(&b, " and %d more", len(items)-maxObjects)
		}
	}
	changes := make([]string, 0, min(len(p.Change), maxObjects))
	for _, c := range p.Change[:min(len(p.Change), maxObjects)] {
		changes = append(changes, c.String(5))
	}
	list("create", p.Create)
	if len(p.Change) > 0 {
		fmt.Fprintf(&b, "; change %s", strings.Join(changes, ", "))
		if len(p.Change) > maxObjects {
			fmt.Fprintf(&b, " and %d more", len(p.Change)-maxObjects)
		}
	}
	list("delete", p.Delete)
	list("refused", p.Refused)
	list("hooks would run:", p.Hooks)
	return b.String()
}

// String is the object and up to maxFields of its changed fields:
// "Deployment combo/combo-operator (spec.replicas)".
func (c ObjectChange) String(maxFields int) string {
	shown := c.Fields[:min(len(c.Fields), maxFields)]
	more := c.More + len(c.Fields) - len(shown)
	s := c.Object + " (" + strings.Join(shown, ", ")
	if more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s + ")"
}
