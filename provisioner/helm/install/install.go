// Package install installs helm-class BundleDeployments: a chart loaded
// with helm.LoadChart, values from spec.config, installed, upgraded and
// uninstalled as a Helm release with Helm's action library.
package install

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/kube"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/provisioner/bundledeployment"
	"github.com/rukpak-dev/rukpak/provisioner/helm"
	"github.com/rukpak-dev/rukpak/provisioner/metrics"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// Installer installs a helm-class BundleDeployment's chart as the Helm
// release named after it, with Helm's action library: crds/ first (created
// if missing and kept on uninstall, as Helm does), hooks with Helm's
// semantics, upgrades of the same release on value or chart changes. The
// records are release.Manager's (chunked when one Secret cannot hold them),
// so `helm list`, `helm history` and `helm get` read them in the
// provisioner's namespace. Every object of the release manifest (not
// hooks) carries the owner label and controller reference the plain class
// stamps, so drift correction, health and uninstall work as for it.
type Installer struct {
	Releases *release.Manager
	// Client deletes what an interrupted uninstall left; Reader reads
	// values sources (uncached: the cache holds no Secrets), as the
	// provisioner (As: as the ServiceAccount).
	Client client.Client
	Reader client.Reader
	// Class is the provisioner class whose BundleDeployments read values
	// sources (watches map changes back to them).
	Class string
	// Timeout bounds each hook's run and Helm's wait for it unless
	// spec.config.timeout says otherwise; 0 means DefaultTimeout.
	Timeout time.Duration
	// RetryAfter is how long a revision that failed is not retried with
	// the same chart and values (a failing hook Job is not run again on
	// every reconcile); 0 means DefaultRetryAfter.
	RetryAfter time.Duration

	// user, when set, is the identity (a ServiceAccount's user name) Helm's
	// kube client and a chart's lookups act as: see As.
	user string
	// reader names the identity Reader acts as, in messages; empty: the
	// provisioner.
	reader string
	// JobWait is how long a worker waits for a render or an action before
	// it answers that it is pending (jobs.go); 0 means DefaultJobWait.
	JobWait time.Duration

	// renders keeps charts frozen for the next action (see prepare),
	// shared with the Installers As returns.
	renders *renders
	// running holds the releases' jobs, shared likewise.
	running *jobs
}

const (
	// DefaultTimeout is Helm's own default for --timeout.
	DefaultTimeout = 5 * time.Minute
	// DefaultRetryAfter lets a failed revision be retried with the same
	// inputs every few minutes, in case what failed was transient.
	DefaultRetryAfter = 5 * time.Minute

	// labelInputs is the release label holding the digest of what a
	// revision was installed from (chart, values, namespace): the same
	// digest means nothing to upgrade.
	labelInputs = "core.rukpak.io/inputs-digest"
	// maxHistory bounds the revisions kept per release, as for the plain
	// class.
	maxHistory = 5

	annotationResourcePolicy = "helm.sh/resource-policy"
)

// Install installs or upgrades release bd.Name from the chart in fsys. The
// action runs in a job (jobs.go): a PendingError says what it waits for
// (a hook) while it runs longer than a worker waits.
func (in *Installer) Install(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, fsys fs.FS, _ []*unstructured.Unstructured, stamp func(*unstructured.Unstructured)) (*release.Result, error) {
	next, err := in.readInputs(ctx, bd, fsys)
	if err != nil {
		return nil, err
	}
	// The outcome of the action a reconcile before started, once it ran.
	if v, err, ok := in.poll(ctx, bd.Name, actionKey(next.digest)); ok {
		res, _ := v.(*release.Result)
		return res, err
	}
	res, act, err := in.plan(ctx, bd, next, stamp)
	if act == nil {
		return res, err
	}
	verb := "installing"
	if res.Upgraded {
		verb = "upgrading"
	}
	v, err := in.run(ctx, bd.Name, actionKey(next.digest), true, verb+" release "+bd.Name, act)
	if r, _ := v.(*release.Result); r != nil {
		res = r
	}
	return res, err
}

// actionKey identifies an action job: the inputs it installs.
type actionKey string

// plan returns what to do for release bd.Name to hold next: the result
// as it stands (the release's deployed revision) and, if one is due, the
// action to run, as a job.
func (in *Installer) plan(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, next *inputs, stamp func(*unstructured.Unstructured)) (*release.Result, func(context.Context, *job) (any, error), error) {
	cfg, ch, vals := next.cfg, next.chart, next.values
	defer in.Releases.Lock(bd.Name)()
	hist, err := in.Releases.RecoverHistory(ctx, bd.Name)
	if err != nil {
		return nil, nil, err
	}
	last, deployed := latest(hist)
	res := &release.Result{Release: deployed, Upgraded: deployed != nil}
	if next.current(last, deployed) {
		if res.Objects, err = installed(deployed); err != nil {
			return res, nil, err
		}
		return res, nil, nil
	}
	verb := "installing"
	if deployed != nil {
		verb = "upgrading"
	}
	if in.waiting(next, last) {
		return res, nil, in.failedRevision(verb, last)
	}

	// The templates ran once, bounded, in a child process, for this
	// action (helm.Action; docs/security.md), most likely for the checks
	// before it: the action installs the text they rendered to.
	frozen, err := in.prepare(ctx, bd, next, last, deployed)
	if err != nil {
		if _, ok := err.(*bundledeployment.PendingError); ok { //nolint:errorlint // prepare returns it as it is
			return res, nil, err
		}
		return res, nil, fmt.Errorf("%s release %q: %w", verb, bd.Name, err)
	}
	ch = frozen.Chart(ch)
	kc := &guardedKube{Client: in.Releases.NewKubeClientAs(cfg.InstallNamespace, in.user), forbidden: in.Releases.Namespace(),
		serverValidates: validatesFields(frozen.Capabilities)}
	if deployed != nil {
		// An install checks what it adopts itself (Helm's rule); an
		// upgrade patches and deletes what the record lists.
		kc.owner = releaseOwner(bd.Name, hist, cfg.InstallNamespace)
	}
	acfg := in.Releases.ActionConfig(ctx, kc)
	acfg.Capabilities = frozen.Capabilities
	acfg.RESTClientGetter = lookupGetter{RESTClientGetter: acfg.RESTClientGetter, forbidden: in.Releases.Namespace(), user: in.user}
	mapper, err := acfg.RESTClientGetter.ToRESTMapper()
	if err != nil {
		return res, nil, fmt.Errorf("creating REST mapper: %w", err)
	}
	pr := &postRenderer{stamp: stamp, release: bd.Name, namespace: cfg.InstallNamespace, forbidden: in.Releases.Namespace(), mapper: mapper}
	labels := map[string]string{labelInputs: next.digest}
	timeout := in.timeout(cfg)
	act := func(ctx context.Context, j *job) (any, error) {
		defer in.Releases.Lock(bd.Name)()
		// Hook waits end when the job is cancelled (an uninstall); the
		// action itself runs to its end, so Helm records its revision.
		kc.stop = ctx.Done()
		kc.waiting = func(s string) { j.setStatus(fmt.Sprintf("%s release %s: %s (up to %s)", verb, bd.Name, s, timeout)) }
		actx := context.WithoutCancel(ctx)
		var rel *helmrelease.Release
		var err error
		if deployed == nil {
			act := action.NewInstall(acfg)
			act.ReleaseName = bd.Name
			act.Namespace = cfg.InstallNamespace
			// A name whose earlier installs all failed is reused, as
			// `helm install --replace` does.
			act.Replace = len(hist) > 0
			// The values were validated in the render child (helm.Action);
			// Helm's validation here would follow the schema's $refs.
			act.SkipSchemaValidation = true
			act.Timeout = timeout
			act.PostRenderer = pr
			act.Labels = labels
			rel, err = act.RunWithContext(actx, ch, vals)
		} else {
			act := action.NewUpgrade(acfg)
			act.Namespace = cfg.InstallNamespace
			act.MaxHistory = maxHistory
			act.SkipSchemaValidation = true
			// Values are exactly what spec.config says, never the previous
			// revision's.
			act.ResetValues = true
			act.Timeout = timeout
			act.PostRenderer = pr
			act.Labels = labels
			rel, err = act.RunWithContext(actx, bd.Name, ch, vals)
		}
		res := &release.Result{Release: deployed, Upgraded: deployed != nil}
		if err != nil {
			recorded, err := in.failed(actx, verb, bd.Name, err, last)
			if recorded {
				// The next action is another revision's.
				in.cache().forget(bd.Name)
			}
			return res, err
		}
		in.cache().forget(bd.Name)
		if kc.owner != nil {
			if kept := kc.owner.leftAlone(); len(kept) > 0 {
				log.FromContext(ctx).Info("not deleting objects dropped from the release that it no longer owns", "release", bd.Name, "objects", kept)
			}
		}
		res.Release = rel
		res.Changed = true
		if res.Objects, err = installed(rel); err != nil {
			return res, err
		}
		return res, nil
	}
	return res, act, nil
}

// inputs are what a revision of a release is installed from.
type inputs struct {
	cfg    *Config
	chart  *chart.Chart
	values map[string]any
	// digest identifies them (inputsDigest), in the revision's labels.
	digest string
}

// readInputs reads what the next revision of bd's release is installed
// from: spec.config, the chart in fsys and the values spec.config names.
func (in *Installer) readInputs(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, fsys fs.FS) (*inputs, error) {
	cfg, err := ParseConfig(bd, in.Releases.Namespace())
	if err != nil {
		return nil, err
	}
	ch, err := helm.LoadChart(fsys)
	if err != nil {
		return nil, err
	}
	reader := in.reader
	if reader == "" {
		reader = "the provisioner"
	}
	vals, err := cfg.MergedValues(ctx, in.Reader, in.Releases.Namespace(), reader)
	if err != nil {
		return nil, err
	}
	digest, err := inputsDigest(ch, vals, cfg.InstallNamespace)
	if err != nil {
		return nil, err
	}
	return &inputs{cfg: cfg, chart: ch, values: vals, digest: digest}, nil
}

// current reports whether deployed, the release's newest revision (last),
// was installed from these inputs: there is nothing to install.
func (ins *inputs) current(last, deployed *helmrelease.Release) bool {
	return deployed != nil && last == deployed && deployed.Labels[labelInputs] == ins.digest
}

// waiting reports whether last, the release's newest revision, failed with
// these inputs less than the retry interval ago: it is not retried yet.
func (in *Installer) waiting(ins *inputs, last *helmrelease.Release) bool {
	return last != nil && last.Info.Status == helmrelease.StatusFailed && last.Labels[labelInputs] == ins.digest &&
		time.Since(last.Info.LastDeployed.Time) < in.retryAfter()
}

// Uninstall uninstalls release name as `helm uninstall` does: pre-delete
// hooks, the release's objects (not crds/, not objects whose
// helm.sh/resource-policy is keep), post-delete hooks, then its records.
// Objects the record lists that are not the release's (any more) are left
// alone and returned (ownership.go). A missing release is not an error.
func (in *Installer) Uninstall(ctx context.Context, name string) ([]string, error) {
	// A render is cancelled; an action's hook waits stop, and Helm records
	// its revision before the uninstall goes on.
	if err := in.stop(name); err != nil {
		return nil, err
	}
	helm.ForgetOwner(name)
	defer in.Releases.Lock(name)()
	in.cache().forget(name)
	metrics.ForgetHelmRenders(name)
	hist, err := in.Releases.RecoverHistory(ctx, name)
	if err != nil || len(hist) == 0 {
		return nil, err
	}
	last, _ := latest(hist)
	kc := &guardedKube{Client: in.Releases.NewKubeClientAs(last.Namespace, in.user), forbidden: in.Releases.Namespace(),
		owner: releaseOwner(name, hist, last.Namespace)}
	act := action.NewUninstall(in.Releases.ActionConfig(ctx, kc))
	act.Timeout = in.timeout(nil)
	act.DeletionPropagation = string(metav1.DeletePropagationBackground)
	if _, err := act.Run(name); err != nil {
		_, err := in.failed(ctx, "uninstalling", name, err, nil)
		return kc.owner.leftAlone(), err
	}
	return kc.owner.leftAlone(), nil
}

// releaseOwner is release name as its records hist know it, installed
// into namespace (first: the one messages name).
func releaseOwner(name string, hist []*helmrelease.Release, namespace string) *owner {
	o := &owner{name: name, namespaces: []string{namespace}}
	for _, r := range hist {
		if !slices.Contains(o.namespaces, r.Namespace) {
			o.namespaces = append(o.namespaces, r.Namespace)
		}
	}
	return o
}

// DeleteIfOwned deletes o if the live object is release name's (Helm's
// release-name annotation and the owner label both name it) and not kept
// by helm.sh/resource-policy: it backs up an uninstall that stopped part
// way, after which the release's records may be gone.
func (in *Installer) DeleteIfOwned(ctx context.Context, o *unstructured.Unstructured, name string) (string, error) {
	live, err := in.Releases.Live(ctx, o)
	switch {
	case err != nil:
		return "", fmt.Errorf("reading %s: %w", describe(o), err)
	case live == nil || !live.DeletionTimestamp.IsZero():
		return "", nil
	case live.Annotations[annotationResourcePolicy] == "keep":
		return describe(o) + " (" + annotationResourcePolicy + ": keep)", nil
	}
	if ns, other := release.Owner(live); other != name || live.Labels[rukpakv1alpha1.LabelOwnerName] != name {
		return fmt.Sprintf("%s (owned by release %s/%s)", describe(o), ns, other), nil
	}
	err = in.Client.Delete(ctx, live, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &live.UID})
	if client.IgnoreNotFound(err) != nil {
		return "", fmt.Errorf("deleting %s: %w", describe(o), err)
	}
	return "", nil
}

// timeout is cfg's spec.config.timeout, else the Installer's (uninstalls,
// which run after the spec is gone, use the Installer's).
func (in *Installer) timeout(cfg *Config) time.Duration {
	if cfg != nil && cfg.timeout > 0 {
		return cfg.timeout
	}
	if in.Timeout > 0 {
		return in.Timeout
	}
	return DefaultTimeout
}

func (in *Installer) retryAfter() time.Duration {
	if in.RetryAfter > 0 {
		return in.RetryAfter
	}
	return DefaultRetryAfter
}

// failed explains err of an action on release name. When the action
// recorded a failed revision (newer than before, the last record before
// the action), the error is that revision's, as failedRevision words it, so
// the condition stays the same while the revision is not retried.
// recorded says whether the action recorded a revision.
func (in *Installer) failed(ctx context.Context, verb, name string, err error, before *helmrelease.Release) (recorded bool, _ error) {
	hist, herr := in.Releases.RecoverHistory(ctx, name)
	if herr == nil {
		last, _ := latest(hist)
		recorded = last != nil && (before == nil || last.Version > before.Version)
		if recorded && last.Info.Status == helmrelease.StatusFailed {
			return true, in.failedRevision(verb, last)
		}
	}
	return recorded, fmt.Errorf("%s release %q: %s", verb, name, oneLine(err.Error()))
}

// failedRevision is the error of a failed revision: what failed (the hook,
// if one did) and when it is retried.
func (in *Installer) failedRevision(verb string, rel *helmrelease.Release) error {
	return fmt.Errorf("%s release %q: %s (revision %d failed; retried with the same chart and values after %s)",
		verb, rel.Name, failure(rel, oneLine(rel.Info.Description)), rel.Version, in.retryAfter())
}

// oneLine folds Helm's multi-line errors (lists of errors) into one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// failure prefixes msg with the hook of rel that failed, if any.
func failure(rel *helmrelease.Release, msg string) string {
	for _, h := range rel.Hooks {
		if h.LastRun.Phase != helmrelease.HookPhaseFailed {
			continue
		}
		events := make([]string, 0, len(h.Events))
		for _, e := range h.Events {
			events = append(events, e.String())
		}
		return fmt.Sprintf("%s hook %s %s (%s) failed: %s", strings.Join(events, ","), h.Kind, h.Name, h.Path, msg)
	}
	return msg
}

// latest returns the newest record and the newest deployed one.
func latest(hist []*helmrelease.Release) (last, deployed *helmrelease.Release) {
	for _, r := range hist {
		if last == nil || r.Version > last.Version {
			last = r
		}
		if r.Info.Status == helmrelease.StatusDeployed && (deployed == nil || r.Version > deployed.Version) {
			deployed = r
		}
	}
	return last, deployed
}

// installed returns the objects of rel's manifest (not its hooks): as the
// post-renderer wrote them, stamped, namespaced and with Helm's ownership
// metadata, which is what drift correction compares with (and restores,
// unless the live object is another release's). An object without the
// release's metadata was not written by the post-renderer: the record was
// altered, and is not trusted with what drift correction restores.
func installed(rel *helmrelease.Release) ([]*unstructured.Unstructured, error) {
	objs, err := release.DecodeManifest(rel.Manifest)
	if err != nil {
		return nil, fmt.Errorf("release %q revision %d: %w", rel.Name, rel.Version, err)
	}
	o := &owner{name: rel.Name, namespaces: []string{rel.Namespace}}
	for _, obj := range objs {
		if why := o.notOwned(obj); why != "" {
			return nil, fmt.Errorf("release %q revision %d lists %s (%s), which the provisioner never records: the record was altered; refusing to restore its objects",
				rel.Name, rel.Version, describe(obj), why)
		}
	}
	return objs, nil
}

// inputsDigest identifies what a revision is installed from. Subcharts
// count too: Helm's record keeps only the parent chart.
func inputsDigest(ch *chart.Chart, vals map[string]any, namespace string) (string, error) {
	h := sha256.New()
	var add func(c *chart.Chart) error
	add = func(c *chart.Chart) error {
		b, err := json.Marshal(c)
		if err != nil {
			return fmt.Errorf("digesting chart %q: %w", c.Name(), err)
		}
		h.Write(b)
		for _, d := range c.Dependencies() {
			if err := add(d); err != nil {
				return err
			}
		}
		return nil
	}
	if err := add(ch); err != nil {
		return "", err
	}
	b, err := json.Marshal(vals) // map keys sorted: canonical
	if err != nil {
		return "", fmt.Errorf("digesting values: %w", err)
	}
	h.Write(b)
	h.Write([]byte(namespace))
	// A label value holds at most 63 characters.
	return hex.EncodeToString(h.Sum(nil))[:40], nil
}

// postRenderer stamps every object of a release manifest as the plain
// class stamps its objects, and makes each object's identity explicit
// (namespace and Helm's ownership metadata), so the record is what was
// applied. Helm does not run it on hooks: guardedKube checks those.
type postRenderer struct {
	stamp     func(*unstructured.Unstructured)
	release   string
	namespace string
	forbidden string
	mapper    meta.RESTMapper
}

func (p *postRenderer) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	docs := releaseutil.SplitManifests(in.String())
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	out := &bytes.Buffer{}
	for _, k := range keys {
		doc := docs[k]
		source := ""
		if first, _, _ := strings.Cut(strings.TrimSpace(doc), "\n"); strings.HasPrefix(first, "# Source: ") {
			source = first
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", strings.TrimPrefix(source, "# Source: "), err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if err := p.object(u); err != nil {
			return nil, err
		}
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, fmt.Errorf("rendering %s: %w", describe(u), err)
		}
		out.WriteString("---\n")
		if source != "" {
			out.WriteString(source + "\n")
		}
		out.Write(b)
	}
	return out, nil
}

func (p *postRenderer) object(u *unstructured.Unstructured) error {
	if u.GetKind() == "" || u.GetName() == "" {
		return fmt.Errorf("an object of the chart has no kind or name: %s %q", u.GetKind(), u.GetName())
	}
	if m, err := p.mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version); err == nil {
		switch {
		case m.Scope.Name() != meta.RESTScopeNameNamespace:
			u.SetNamespace("")
		case u.GetNamespace() == "":
			u.SetNamespace(p.namespace)
		}
	}
	if u.GetNamespace() == p.forbidden {
		return fmt.Errorf("%s is in the provisioner's namespace %q, which holds release records and credentials: charts may not install objects there", describe(u), p.forbidden)
	}
	l := u.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l["app.kubernetes.io/managed-by"] = "Helm"
	u.SetLabels(l)
	a := u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a["meta.helm.sh/release-name"] = p.release
	a["meta.helm.sh/release-namespace"] = p.namespace
	u.SetAnnotations(a)
	p.stamp(u)
	if a[annotationResourcePolicy] == "keep" {
		// Helm leaves such objects on uninstall; the garbage collector
		// would not, were the BundleDeployment their owner.
		var refs []metav1.OwnerReference // nil drops the field
		for _, r := range u.GetOwnerReferences() {
			if r.Kind != "BundleDeployment" || r.APIVersion != rukpakv1alpha1.GroupVersion.String() {
				refs = append(refs, r)
			}
		}
		u.SetOwnerReferences(refs)
	}
	return nil
}

// guardedKube is Helm's client, refusing to build (so to create, update or
// delete) any object in the provisioner's namespace: hooks, which the
// post-renderer never sees, included. With an owner, it patches and
// deletes the objects of a release record only if they are the release's
// (ownership.go).
type guardedKube struct {
	*kube.Client
	forbidden string
	// stop ends hook waits (WatchUntilReady); waiting hears what they
	// wait for.
	stop    <-chan struct{}
	waiting func(string)
	// serverValidates skips the client-side validation Helm asks for
	// (validatesFields).
	serverValidates bool
	// owner, when set, is the release whose objects the record lists.
	owner *owner
}

// Update is Helm's, refusing to patch objects the previous revision lists
// that are not the release's now, and deleting those the new revision
// drops only if they are.
func (k *guardedKube) Update(original, target kube.ResourceList, force bool) (*kube.Result, error) {
	return k.update(original, target, func(o, t kube.ResourceList) (*kube.Result, error) { return k.Client.Update(o, t, force) })
}

// UpdateThreeWayMerge is Update with Helm's three-way merge.
func (k *guardedKube) UpdateThreeWayMerge(original, target kube.ResourceList, force bool) (*kube.Result, error) {
	return k.update(original, target, func(o, t kube.ResourceList) (*kube.Result, error) {
		return k.Client.UpdateThreeWayMerge(o, t, force)
	})
}

func (k *guardedKube) update(original, target kube.ResourceList, update func(original, target kube.ResourceList) (*kube.Result, error)) (*kube.Result, error) {
	if k.owner == nil {
		return update(original, target)
	}
	// Helm reads its result even with an error.
	if err := k.owner.checkUpdates(original, target); err != nil {
		return &kube.Result{}, err
	}
	// Helm deletes what original lists beyond target: none left to it.
	res, err := update(original.Intersect(target), target)
	if err != nil {
		return res, err
	}
	gone, errs := k.owner.deleteOwned(original.Difference(target), metav1.DeletePropagationBackground)
	res.Deleted = append(res.Deleted, gone.Deleted...)
	// Helm only logs the deletes that fail.
	for _, err := range errs {
		k.Log("not deleting an object dropped from the release: %v", err)
	}
	return res, nil
}

// Delete is Helm's for hooks (whose objects carry no ownership metadata)
// and the objects of a failed install or upgrade it created itself; the
// objects of a release record are deleted by DeleteWithPropagationPolicy.
func (k *guardedKube) Delete(resources kube.ResourceList) (*kube.Result, []error) {
	return k.Client.Delete(resources)
}

// DeleteWithPropagationPolicy deletes the objects of an uninstalled
// release's record: with an owner, only those that are the release's.
func (k *guardedKube) DeleteWithPropagationPolicy(resources kube.ResourceList, policy metav1.DeletionPropagation) (*kube.Result, []error) {
	if k.owner == nil {
		return k.Client.DeleteWithPropagationPolicy(resources, policy)
	}
	return k.owner.deleteOwned(resources, policy)
}

func (k *guardedKube) Build(r io.Reader, validate bool) (kube.ResourceList, error) {
	list, err := k.Client.Build(r, validate && !k.serverValidates)
	if err != nil {
		return nil, err
	}
	for _, info := range list {
		if info.Namespaced() && info.Namespace == k.forbidden {
			return nil, fmt.Errorf("%s %s/%s is in the provisioner's namespace %q, which holds release records and credentials: charts may not install objects there",
				info.Mapping.GroupVersionKind.Kind, info.Namespace, info.Name, k.forbidden)
		}
	}
	return list, nil
}

// fieldValidationGA is the Kubernetes version whose API server validates
// the fields of every object it is sent (server-side field validation, GA).
var fieldValidationGA = version.MajorMinor(1, 27)

// validatesFields says whether the API server of caps validates fields
// itself. Helm builds a release's objects (and each hook) with kubectl's
// validation, which asks the server first: it fetches and parses the
// OpenAPI v3 document of every group version the manifest uses (~50 ms
// each for core/v1, rbac and apps, on every install and upgrade: a new
// client each time), learns that the server supports the fieldValidation
// parameter for the kind, and then validates nothing on the client (Helm
// sends no fieldValidation: the server's default applies). Against such a
// server, skipping the question changes nothing but the time (issue 14:
// a third of kube-state-metrics' install), but for a kind its OpenAPI v3
// does not describe and no CRD defines (an aggregated API's that
// publishes none), which kubectl validates against the OpenAPI v2
// document instead. Older servers still get Helm's validation.
func validatesFields(caps *chartutil.Capabilities) bool {
	if caps == nil {
		return false
	}
	v, err := version.ParseGeneric(caps.KubeVersion.Version)
	return err == nil && v.AtLeast(fieldValidationGA)
}

func describe(o *unstructured.Unstructured) string {
	if ns := o.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", o.GetKind(), ns, o.GetName())
	}
	return fmt.Sprintf("%s %s", o.GetKind(), o.GetName())
}

// lookupGetter is the getter Helm's engine builds the client of a chart's
// `lookup` calls from (nothing else in an install or upgrade asks it for a
// REST config). Charts may read the cluster as Helm lets them, but not
// the provisioner's namespace, which holds its credentials and the
// release records, nor list Secrets or ConfigMaps across namespaces (which
// would include it); and only read.
type lookupGetter struct {
	action.RESTClientGetter
	forbidden string
	// user, when set, is who lookups read as (impersonated).
	user string
}

func (g lookupGetter) ToRESTConfig() (*rest.Config, error) {
	cfg, err := g.RESTClientGetter.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	if g.user != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: g.user}
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return lookupGuard{next: rt, forbidden: g.forbidden}
	})
	return cfg, nil
}

type lookupGuard struct {
	next      http.RoundTripper
	forbidden string
}

func (g lookupGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := g.allowed(req.Method, req.URL.Path); err != nil {
		return nil, err
	}
	return g.next.RoundTrip(req)
}

func (g lookupGuard) allowed(method, p string) error {
	if method != http.MethodGet {
		return fmt.Errorf("a chart's lookup may only read (%s %s)", method, p)
	}
	segs := strings.Split(strings.Trim(p, "/"), "/")
	for i, s := range segs {
		if s == "namespaces" && i+1 < len(segs) && segs[i+1] == g.forbidden {
			return fmt.Errorf("a chart's lookup may not read the provisioner's namespace %q", g.forbidden)
		}
	}
	// /api/v1/secrets, /apis/GROUP/VERSION/... never name these two.
	if len(segs) == 3 && segs[0] == "api" && (segs[2] == "secrets" || segs[2] == "configmaps") {
		return fmt.Errorf("a chart's lookup may not list %s across namespaces (the provisioner's namespace holds its credentials)", segs[2])
	}
	return nil
}
