// Package crdupgrade decides whether replacing a CRD on the cluster with a
// new version of it is safe for the custom resources already stored: a
// static comparison of the two CRDs names each change (scope, versions,
// required fields, removed fields, types, enums, defaults, bounds, and
// anything else as an "unknown change"), and every existing object is then
// validated against the new schema of each served version with the API
// server's own validation libraries (OpenAPI schema, list types, embedded
// resources, CEL rules), streamed one object at a time within byte and
// memory budgets (budget.go), so memory stays bounded however many and
// however large the objects are.
//
// Only scope changes and removed stored versions fail outright (the API
// server refuses both). Every other change fails only if it breaks an
// object that exists: a new required field that every object already sets,
// or an unknown change no object notices, passes. An object breaks when it
// fails the new schema where it passed the old one, when the new schema
// would prune a field it holds, when a version it is read at stops being
// served, or, for a changed or removed default, when it holds the old
// default (which the API server may have written into it). An added
// default never fails: objects without the field read it from then on,
// which is what adding it means.
package crdupgrade

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Check names one kind of CRD change.
type Check string

// The checks, in the order findings are reported.
const (
	CheckScopeChanged         Check = "ScopeChanged"
	CheckStoredVersionRemoved Check = "StoredVersionRemoved"
	CheckServedVersionRemoved Check = "ServedVersionRemoved"
	CheckRequiredFieldAdded   Check = "RequiredFieldAdded"
	CheckFieldRemoved         Check = "FieldRemoved"
	CheckTypeChanged          Check = "TypeChanged"
	CheckEnumNarrowed         Check = "EnumNarrowed"
	CheckDefaultChanged       Check = "DefaultChanged"
	CheckBoundsChanged        Check = "BoundsChanged"
	CheckUnknown              Check = "UnknownChange"
)

// Lister reads one page (Limit and Continue) of a CRD's objects at one
// version, across all namespaces, as the JSON of a list, which the check
// decodes one object at a time. RESTLister is one.
type Lister interface {
	ListJSON(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (io.ReadCloser, error)
}

// Options bound a check. Unset (zero) fields take the defaults.
type Options struct {
	// PageSize is the most objects listed per request (default 500).
	PageSize int64
	// PageBytes sets how many objects a request asks for: this many bytes
	// at the size of the largest object read so far (at MaxObjectBytes for
	// the first page), at most PageSize. A page is read as a stream and
	// never held whole.
	PageBytes int64
	// MaxObjectBytes is the largest object (JSON) read; a larger one fails
	// the check with a BudgetError.
	MaxObjectBytes int64
	// MaxBytes is the most bytes of objects read to check one CRD.
	MaxBytes int64
	// Budget is the memory the objects being decoded and validated may take
	// at once, shared by every check that uses it (nil: one of
	// DefaultMemoryBytes shared by the process).
	Budget *Budget
	// MaxListed is how many offending objects a finding keeps by name
	// (default 100); the rest are only counted.
	MaxListed int
	// Timeout bounds one CRD's check (default 5 minutes: 100,000 small
	// objects take ~20 s; CEL rules may cost up to the API server's
	// per-object budget each).
	Timeout time.Duration

	memoryBytes int64 // Budget's size, as BindFlags parses it
}

// DefaultTimeout is Options.Timeout's default.
const DefaultTimeout = 5 * time.Minute

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return DefaultTimeout
	}
	return o.Timeout
}

func (o Options) pageSize() int64 {
	if o.PageSize <= 0 {
		return DefaultPageSize
	}
	return o.PageSize
}

func (o Options) pageBytes() int64 {
	if o.PageBytes <= 0 {
		return DefaultPageBytes
	}
	return o.PageBytes
}

func (o Options) maxObjectBytes() int64 {
	if o.MaxObjectBytes <= 0 {
		return DefaultMaxObjectBytes
	}
	return o.MaxObjectBytes
}

func (o Options) maxBytes() int64 {
	if o.MaxBytes <= 0 {
		return DefaultMaxBytes
	}
	return o.MaxBytes
}

func (o Options) budget() *Budget {
	if o.Budget == nil {
		return defaultBudget
	}
	return o.Budget
}

func (o Options) maxListed() int {
	if o.MaxListed <= 0 {
		return 100
	}
	return o.MaxListed
}

// Finding is one change and its verdict.
type Finding struct {
	Check Check
	// Version is the CRD version the change is in ("" for the CRD as a
	// whole).
	Version string
	// Path is the field the change is at (nil when not about a field).
	Path   Path
	Detail string
	// Fails is true when the change breaks the upgrade.
	Fails bool
	// Objects are the first offending objects; Count counts them all.
	Objects []Object
	Count   int
}

// Object is an existing custom resource a change breaks.
type Object struct {
	Namespace, Name string
	// Reason is what breaks ("" when the whole object is: a version it is
	// read at goes away).
	Reason string
}

func (o Object) String() string {
	s := o.Name
	if o.Namespace != "" {
		s = o.Namespace + "/" + s
	}
	if o.Reason != "" {
		s += " (" + o.Reason + ")"
	}
	return s
}

// Report is the verdict on one CRD.
type Report struct {
	CRD string
	// APIVersion and Kind of the CRD's objects, as they are served now.
	APIVersion, Kind string
	Findings         []*Finding
}

// Failed returns the failing findings.
func (r *Report) Failed() []*Finding {
	var out []*Finding
	for _, f := range r.Findings {
		if f.Fails {
			out = append(out, f)
		}
	}
	return out
}

// Compare compares the CRD on the cluster (old) with the one an upgrade
// would apply (new), validating every existing object through l.
func Compare(ctx context.Context, l Lister, old, new *apiextensionsv1.CustomResourceDefinition, opts Options) (*Report, error) {
	r := &Report{CRD: new.Name, Kind: old.Spec.Names.Kind,
		APIVersion: schema.GroupVersion{Group: old.Spec.Group, Version: servedVersion(old)}.String()}
	if old.Spec.Scope != new.Spec.Scope {
		r.Findings = append(r.Findings, &Finding{Check: CheckScopeChanged, Fails: true,
			Detail: fmt.Sprintf("scope changed from %s to %s", old.Spec.Scope, new.Spec.Scope)})
	}
	for _, v := range old.Status.StoredVersions {
		if newVersion(new, v) == nil {
			r.Findings = append(r.Findings, &Finding{Check: CheckStoredVersionRemoved, Version: v, Fails: true,
				Detail: fmt.Sprintf("version %s removed while status.storedVersions lists it (objects may still be stored in it)", v)})
		}
	}
	if len(r.Findings) > 0 {
		// The API server refuses the update: no need to look further.
		return r, nil
	}

	var removedServed []*Finding
	for _, v := range old.Spec.Versions {
		if nv := newVersion(new, v.Name); v.Served && (nv == nil || !nv.Served) {
			f := &Finding{Check: CheckServedVersionRemoved, Version: v.Name, Detail: fmt.Sprintf("version %s no longer served", v.Name)}
			removedServed = append(removedServed, f)
			r.Findings = append(r.Findings, f)
		}
	}

	// One pass over the objects per version the new CRD serves.
	var passes []*pass
	for _, nv := range new.Spec.Versions {
		if !nv.Served {
			continue
		}
		src := sourceVersion(old, new, nv.Name)
		if src == "" {
			continue
		}
		p, err := newPass(old, new, src, nv.Name)
		if err != nil {
			return nil, fmt.Errorf("CRD %s: %w", new.Name, err)
		}
		for _, c := range p.changes {
			f := &Finding{Check: c.Check, Version: nv.Name, Path: c.Path, Detail: c.Detail}
			p.findings = append(p.findings, f)
			r.Findings = append(r.Findings, f)
		}
		if len(p.changes) > 0 {
			passes = append(passes, p)
		}
	}
	if len(removedServed) > 0 {
		if len(passes) == 0 {
			// Nothing else to validate: one pass only to find the objects
			// (the old CRD serves a version: it served the removed one).
			passes = append(passes, &pass{listVersion: servedVersion(old)})
		}
		passes[0].everyObject = removedServed
	}
	ctx, cancel := context.WithTimeoutCause(ctx, opts.timeout(), fmt.Errorf("checking the objects took longer than %s", opts.timeout()))
	defer cancel()
	s := &stream{opts: opts, budget: opts.budget()}
	for _, p := range passes {
		if err := p.run(ctx, l, old, s); err != nil {
			return nil, fmt.Errorf("checking the objects of CRD %s at version %s: %w", new.Name, p.listVersion, err)
		}
		r.Findings = append(r.Findings, p.unattributed...)
	}
	for _, f := range r.Findings {
		f.Fails = f.Fails || f.Count > 0
	}
	slices.SortStableFunc(r.Findings, func(a, b *Finding) int { return checkRank(a.Check) - checkRank(b.Check) })
	return r, nil
}

func checkRank(c Check) int {
	return slices.Index([]Check{CheckScopeChanged, CheckStoredVersionRemoved, CheckServedVersionRemoved, CheckRequiredFieldAdded,
		CheckFieldRemoved, CheckTypeChanged, CheckEnumNarrowed, CheckDefaultChanged, CheckBoundsChanged, CheckUnknown}, c)
}

func newVersion(crd *apiextensionsv1.CustomResourceDefinition, name string) *apiextensionsv1.CustomResourceDefinitionVersion {
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == name {
			return &crd.Spec.Versions[i]
		}
	}
	return nil
}

// servedVersion is the version objects are read at when a version is new:
// the storage version if served, else the first served one.
func servedVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	first := ""
	for _, v := range crd.Spec.Versions {
		if v.Served && v.Storage {
			return v.Name
		}
		if v.Served && first == "" {
			first = v.Name
		}
	}
	return first
}

// sourceVersion is the version of the old CRD whose objects become the new
// CRD's version: itself if the old CRD serves it, else (a new version,
// converted without a webhook: only apiVersion changes) the old served
// version. A new version converted by a webhook cannot be checked before
// the webhook runs: "".
func sourceVersion(old, new *apiextensionsv1.CustomResourceDefinition, version string) string {
	if v := newVersion(old, version); v != nil && v.Served {
		return version
	}
	if new.Spec.Conversion != nil && new.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
		return ""
	}
	return servedVersion(old)
}

// pass reads the objects of one version and judges the changes of one new
// version against them.
type pass struct {
	listVersion, newVersion string
	oldSchema, newSchema    *versionSchema
	changes                 []Change
	findings                []*Finding // one per change, same order
	// everyObject are findings every object fails (removed served versions).
	everyObject  []*Finding
	unattributed []*Finding
}

func newPass(old, new *apiextensionsv1.CustomResourceDefinition, src, version string) (*pass, error) {
	p := &pass{listVersion: src, newVersion: version}
	p.changes = diffSchemas(schemaOf(old, src), schemaOf(new, version))
	if len(p.changes) == 0 {
		// The usual case (a reconcile of an installed bundle): nothing to
		// validate, and compiling CEL rules is not free.
		return p, nil
	}
	var err error
	if p.oldSchema, err = compileVersion(old, src); err != nil {
		return nil, fmt.Errorf("the CRD on the cluster: %w", err)
	}
	if p.newSchema, err = compileVersion(new, version); err != nil {
		return nil, fmt.Errorf("the new CRD: %w", err)
	}
	return p, nil
}

func schemaOf(crd *apiextensionsv1.CustomResourceDefinition, version string) *apiextensionsv1.JSONSchemaProps {
	v := newVersion(crd, version)
	if v == nil || v.Schema == nil {
		return nil
	}
	return v.Schema.OpenAPIV3Schema
}

// judge records which changes obj is affected by.
func (p *pass) judge(ctx context.Context, obj *unstructured.Unstructured, opts Options) {
	name := Object{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	for _, f := range p.everyObject {
		f.add(name, "", opts)
	}
	if p.newSchema == nil {
		return
	}
	content := obj.UnstructuredContent()
	if p.newVersion != p.listVersion {
		content = obj.DeepCopy().UnstructuredContent()
		content["apiVersion"] = obj.GroupVersionKind().Group + "/" + p.newVersion
	}
	hit := map[*Finding]bool{}
	if errs := p.newSchema.validate(ctx, content); len(errs) > 0 {
		before := map[string]bool{}
		if p.oldSchema != nil {
			for _, e := range p.oldSchema.validate(ctx, obj.UnstructuredContent()) {
				before[e.Error()] = true
			}
		}
		for _, e := range errs {
			if !before[e.Error()] {
				p.attribute(parseFieldPath(e.Field), name, e.Error(), nil, hit, opts)
			}
		}
	}
	for _, path := range p.newSchema.pruned(content) {
		p.attribute(parseFieldPath(path), name, path+": field would be dropped", nil, hit, opts)
	}
	for i, c := range p.changes {
		if c.oldDefault == "" {
			continue
		}
		for _, at := range holding(content, c.Path, nil, c.oldDefault) {
			if !hit[p.findings[i]] {
				hit[p.findings[i]] = true
				p.findings[i].add(name, at+": holds the old default "+c.oldDefault, opts)
			}
		}
	}
}

// attribute charges an object's problem at path to the change with the
// longest path covering it (of the given checks, when any), or else to an
// unknown change at path itself. Each finding counts an object once.
func (p *pass) attribute(path Path, obj Object, reason string, only []Check, hit map[*Finding]bool, opts Options) {
	var best *Finding
	for i, c := range p.changes {
		if (len(only) > 0 && !slices.Contains(only, c.Check)) || !c.Path.covers(path) {
			continue
		}
		if best == nil || len(c.Path) > len(best.Path) {
			best = p.findings[i]
		}
	}
	if best == nil {
		if len(only) > 0 {
			return
		}
		for _, f := range p.unattributed {
			if slices.Equal(f.Path, path) {
				best = f
			}
		}
		if best == nil {
			best = &Finding{Check: CheckUnknown, Version: p.newVersion, Path: path, Detail: "objects fail validation where no schema change was found"}
			p.unattributed = append(p.unattributed, best)
		}
	}
	if !hit[best] {
		hit[best] = true
		best.add(obj, reason, opts)
	}
}

func (f *Finding) add(obj Object, reason string, opts Options) {
	f.Count++
	if len(f.Objects) < opts.maxListed() {
		obj.Reason = truncate(reason, maxReason)
		f.Objects = append(f.Objects, obj)
	}
}

// holding returns the concrete paths under which x (decoded JSON), walked
// along path ("*" for every list item or map value), holds the value
// whose compact JSON is value.
func holding(x any, path Path, at Path, value string) []string {
	if len(path) == 0 {
		b, err := json.Marshal(x)
		if err == nil && string(b) == value {
			return []string{at.String()}
		}
		return nil
	}
	var out []string
	switch v := x.(type) {
	case map[string]any:
		if path[0] == "*" {
			for _, k := range sortedKeys(v) {
				out = append(out, holding(v[k], path[1:], at.child(k), value)...)
			}
		} else if child, ok := v[path[0]]; ok {
			out = holding(child, path[1:], at.child(path[0]), value)
		}
	case []any:
		if path[0] == "*" {
			for i, item := range v {
				out = append(out, holding(item, path[1:], at.child("["+strconv.Itoa(i)+"]"), value)...)
			}
		}
	}
	return out
}

const maxReason = 200

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}
