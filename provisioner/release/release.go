// Package release installs a BundleDeployment's objects as a Helm release
// (one release per BundleDeployment) with Helm's action library, and
// recovers releases a crash left half done.
package release

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/kube"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/rukpak-dev/rukpak/internal/jsonmap"
	"github.com/rukpak-dev/rukpak/internal/leanclient"
	"github.com/rukpak-dev/rukpak/internal/leanmeta"
	"github.com/rukpak-dev/rukpak/internal/memomapper"
	"github.com/rukpak-dev/rukpak/internal/objmeta"
	"github.com/rukpak-dev/rukpak/provisioner/memo"
	"github.com/rukpak-dev/rukpak/provisioner/metrics"
)

// maxHistory bounds the release revisions kept per BundleDeployment.
const maxHistory = 5

// Manager installs, upgrades and uninstalls releases whose records live in
// one namespace.
type Manager struct {
	getter *restGetter
	client client.Client
	// own reads CRDs' conditions (crds.go), with the manager's own
	// identity in every view.
	own       *leanclient.Client
	namespace string
	store     *storage.Storage
	records   *chunkedSecrets
	kube      *kube.Client

	// locks serialise actions on one release: Helm's own lock is a release
	// status, which a crash can leave behind. Shared with the views As
	// returns.
	locks *releaseLocks
	// crowded remembers where the ownership check's LIST does not pay
	// (apply.go); shared with the views As returns.
	crowded *crowdedKinds
	// applied remembers, per release, what its last unchanged Apply found
	// (applied.go); shared with the views As returns.
	applied *appliedReleases
	// crdVersions, once set (WatchCRDsIn), paces the reads of CRDs being
	// established (crds.go); shared with the views As returns.
	crdVersions *crdVersions
}

type releaseLocks struct {
	mu     sync.Mutex
	byName map[string]*sync.Mutex
}

// Option configures a Manager.
type Option func(*managerOptions)

type managerOptions struct{ maxRecordBytes int64 }

// WithMaxRecordBytes bounds one release revision's record (its JSON, about
// the size of its manifest); 0 means DefaultMaxRecordBytes.
func WithMaxRecordBytes(n int64) Option {
	return func(o *managerOptions) { o.maxRecordBytes = n }
}

// NewManager keeps release records as Secrets in namespace (split across
// several when one cannot hold a record: chunked.go). No release installs
// objects there (see place).
func NewManager(cfg *rest.Config, namespace string, opts ...Option) (*Manager, error) {
	var o managerOptions
	for _, opt := range opts {
		opt(&o)
	}
	cfg = rest.CopyConfig(cfg)
	// Helm sends one request per object; client-side throttling would make a
	// 1,000-object bundle take minutes. The API server's own priority and
	// fairness protects it.
	cfg.QPS, cfg.Burst = -1, -1
	getter, err := newRESTGetter(cfg, namespace)
	if err != nil {
		return nil, fmt.Errorf("creating discovery client: %w", err)
	}
	// Release records in protobuf: a record's compressed release travels
	// as its bytes, where JSON base64-encodes what Helm already did (each
	// write and read encoded and decoded a third more, twice).
	recordsCfg := rest.CopyConfig(cfg)
	recordsCfg.ContentType = runtime.ContentTypeProtobuf
	recordsCfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cs, err := kubernetes.NewForConfig(recordsCfg)
	if err != nil {
		return nil, fmt.Errorf("creating clientset: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	// Metadata answers (ownership checks, applies) without managed fields:
	// nothing here reads them. Helm's getter keeps the plain config.
	hc, err := rest.HTTPClientFor(leanmeta.Config(cfg))
	if err != nil {
		return nil, fmt.Errorf("creating HTTP client: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("creating REST mapper: %w", err)
	}
	// The client maps every object it applies or reads: remembered, a
	// mapping costs a map lookup instead of one per API group. A kind not
	// served is remembered too (a failing install asks for it several
	// times per attempt, each a read of all discovery): CRD events and
	// waits forget it (ForgetMissing).
	cc, err := client.New(cfg, client.Options{Scheme: scheme, HTTPClient: hc, Mapper: memomapper.New(mapper, 0).RememberMissing(0)})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	// Ownership reads and applies, a few per installed object, as lean
	// requests.
	c, err := leanclient.New(cc, cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	kc := kube.New(getter)
	kc.Namespace = namespace
	mc, err := metadata.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("creating metadata client: %w", err)
	}
	d := newChunkedSecrets(cs.CoreV1().Secrets(namespace), mc.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(namespace), o.maxRecordBytes)
	d.writes = leanSecrets{client: c, namespace: namespace}
	d.index = newRecordIndex(mc, namespace)
	return &Manager{
		namespace:   namespace,
		getter:      getter,
		store:       storage.Init(d),
		records:     d,
		kube:        kc,
		locks:       &releaseLocks{byName: map[string]*sync.Mutex{}},
		crowded:     &crowdedKinds{seen: map[kindInNamespace]crowding{}},
		applied:     &appliedReleases{byName: map[string]appliedRelease{}},
		crdVersions: &crdVersions{},
		client:      c,
		own:         c,
	}, nil
}

// Start keeps the index of release records (index.go) until ctx is done:
// once it has synced, a release's history is read by name, record by
// record, instead of by a LIST whose cost on the API server grows with
// every record in the namespace. Without Start (or until it has synced)
// histories are listed. A manager.Runnable, on every replica.
func (m *Manager) Start(ctx context.Context) error {
	m.records.index.run(ctx)
	return nil
}

// AddTo adds the Manager to mgr, which starts it (Start). From now on an
// Apply waits for the index to sync as one after Start does, even if a
// controller's worker calls it before mgr has got round to Start.
func (m *Manager) AddTo(mgr manager.Manager) error {
	m.records.index.started.Store(true)
	if err := mgr.Add(m); err != nil {
		return fmt.Errorf("adding the release manager: %w", err)
	}
	return nil
}

// OnRecordChange adds fn to what is told the name of a release whose
// records someone other than this process wrote or deleted (a Helm CLI
// upgrade or rollback, another replica, a hand edit), as the index of
// records shows it once it has synced, 2 s after the first such change
// (which tells its own writes apart and coalesces a burst into one call);
// the next Apply of that release reads what changed. fn is called from a
// timer's goroutine and must not block.
func (m *Manager) OnRecordChange(fn func(release string)) {
	if m.records.index != nil {
		m.records.index.OnChange(fn)
	}
}

// NeedLeaderElection is false: the index is a cache, warm when this
// replica is elected.
func (m *Manager) NeedLeaderElection() bool { return false }

// RecordedAt is the resourceVersion of the last write of release name's
// records, from the index of records (no request): an installed object
// whose resourceVersion is older has not changed since that write, which
// came after the release's objects were applied. ok is false when the
// index cannot tell (not synced yet, a write of this process not shown in
// it yet, no records); resourceVersions are compared as the numbers the
// API server issues (etcd revisions).
func (m *Manager) RecordedAt(name string) (rv uint64, ok bool) {
	if m.records.index == nil {
		return 0, false
	}
	return m.records.index.recordedAt(name)
}

// Namespace holds the release records; no release installs objects there.
func (m *Manager) Namespace() string { return m.namespace }

// As returns a view of m that reads, applies and deletes the installed
// objects with c (a client impersonating another identity, sharing m's
// RESTMapper), while the release records stay written with m's own
// identity: whoever installs may not forge or read the records, which hold
// every revision's manifest. The view shares m's records and locks.
func (m *Manager) As(c client.Client) *Manager {
	v := *m
	v.client = c
	return &v
}

// Client is the client objects are applied and deleted with.
func (m *Manager) Client() client.Client { return m.client }

// ForgetMissing tells the client's mapper that the kinds of groups may be
// served now (a CRD of theirs was created or changed), if it remembered
// them missing.
func (m *Manager) ForgetMissing(groups ...string) {
	if r, ok := m.client.RESTMapper().(*memomapper.Mapper); ok {
		r.ForgetMissing(groups...)
	}
}

func (m *Manager) lock(name string) func() {
	m.locks.mu.Lock()
	l, ok := m.locks.byName[name]
	if !ok {
		l = &sync.Mutex{}
		m.locks.byName[name] = l
	}
	m.locks.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Result says what Apply did.
type Result struct {
	Release *helmrelease.Release
	// Upgraded is true when the release existed before.
	Upgraded bool
	// Changed is false when the release already had this exact manifest.
	Changed bool
	// Objects are the objects as the release applies them: stamped, with
	// Helm's ownership metadata and namespaces resolved, without the fields
	// the API server's schema does not declare. Set when Apply succeeds.
	Objects []*unstructured.Unstructured
	// Dropped are the fields this Apply left out because the API server's
	// schema does not declare them, by object; only objects it applied.
	Dropped []DroppedFields

	// versions are where the applies of Objects left them, by key; empty
	// unless this Apply applied them.
	versions map[string]Applied
	// manifestSize is the size of Release's manifest when Release, kept
	// from an earlier Apply, was kept without it.
	manifestSize int
	// records is the fingerprint of the release's records as this Apply's
	// own writes left them (Fingerprint's, once the informer shows them),
	// when it wrote any and no one else wrote meanwhile.
	records      string
	recordsKnown bool
}

// Records is the fingerprint of the release's records as this Apply's own
// writes left them, if it wrote them and no one else wrote one meanwhile:
// what Fingerprint will say once the informer shows those writes, unless
// someone writes a record after them.
func (r *Result) Records() (string, bool) {
	if r == nil {
		return "", false
	}
	return r.records, r.recordsKnown
}

// ManifestSize is the size of the release's manifest.
func (r *Result) ManifestSize() int {
	switch {
	case r == nil || r.Release == nil:
		return 0
	case r.manifestSize > 0:
		return r.manifestSize
	}
	return len(r.Release.Manifest)
}

// AppliedAt is where this Apply left o (one of Objects), and whether it
// applied it.
func (r *Result) AppliedAt(o *unstructured.Unstructured) (Applied, bool) {
	if r == nil {
		return Applied{}, false
	}
	at, ok := r.versions[key(o)]
	return at, ok
}

// Apply makes the release name hold exactly objs, after mutate (owner
// labels and references) has stamped them.
//
// The release record is Helm's own (a Secret in the release namespace, read
// by `helm list`, `helm history` and Helm's uninstall). An upgrade writes it
// pending before any object changes and deployed or failed after, so a
// crash in between is recovered like any interrupted Helm action. A first
// install writes it once, deployed or failed, after the apply (one write
// per install fewer, issue 15): until then nothing of the release existed,
// and a crash in between leaves objects that carry the release's ownership
// metadata, which the next Apply takes over as its own and an uninstall's
// sweep (and the garbage collector, through their owner reference)
// removes. The objects
// themselves are applied by applyObjects, in parallel, rather than through
// action.Install/Upgrade, whose per-object sequential requests made a
// 1,000-object bundle take several times longer than the API server needs
// (docs/benchmarks.md).
func (m *Manager) Apply(ctx context.Context, name string, objs []*unstructured.Unstructured, mutate func(*unstructured.Unstructured)) (*Result, error) {
	return m.apply(ctx, name, objs, mutate, false)
}

// Fingerprint names the records of release name as this process's
// informer has them (any write of one changes it); ok is false while that
// is not known.
func (m *Manager) Fingerprint(name string) (string, bool) {
	return m.records.fingerprint(name)
}

// ApplyOwned is Apply of objects the caller gives away: they are stamped
// in place, not copied first (for a bundle of large CRDs, a copy of
// several MB on every reconcile), and are the Result's Objects. The
// caller must not share them, nor use them as they were afterwards.
func (m *Manager) ApplyOwned(ctx context.Context, name string, objs []*unstructured.Unstructured, mutate func(*unstructured.Unstructured)) (*Result, error) {
	return m.apply(ctx, name, objs, mutate, true)
}

func (m *Manager) apply(ctx context.Context, name string, objs []*unstructured.Unstructured, mutate func(*unstructured.Unstructured), owned bool) (*Result, error) {
	defer m.lock(name)()

	stamp := m.stamp
	if owned {
		stamp = m.stampInPlace
	}
	stamped, err := stamp(name, objs, mutate)
	if err != nil {
		return nil, err
	}
	// Objects and records as they were when the release last held exactly
	// these objects: nothing to render, read or write.
	digest := memo.Digest(stamped)
	if m.records.index != nil {
		m.records.index.waitSynced(ctx)
	}
	records, indexed := m.records.fingerprint(name)
	if indexed {
		if e, ok := m.applied.unchanged(name, digest, records); ok {
			return &Result{Release: e.release, Upgraded: true, Objects: carryRecorded(stamped, e.drops), manifestSize: e.manifestSize}, nil
		}
		// Remembered for other objects or records: of no more use.
		m.applied.forget(name)
		// Not applied by this process since it started: the deployed
		// record's labels may say the same (recorded.go).
		if r, ok := m.records.index.deployedHolds(name, digest); ok {
			rel := r.release(name, m.namespace)
			m.applied.remember(name, digest, r.records, rel, r.manifestBytes, nil)
			return &Result{Release: rel, Upgraded: true, Objects: stamped, manifestSize: r.manifestBytes}, nil
		}
	}
	// (Not indexed: the informer has not shown a record this process
	// wrote. What a write of it remembered is kept for when it has; it can
	// only match records exactly as they are remembered.)

	// The records this Apply reads and writes are noted from here, before
	// the history is read, so that a record someone else writes meanwhile
	// is not taken for one that was there before (settle, below).
	m.records.track(name)
	defer m.records.untrack(name)

	metrics.Step(metrics.StepRender)
	manifest, sent, err := render(stamped, nil, true)
	if err != nil {
		return nil, err
	}
	hist, err := m.history(ctx, name)
	if err != nil {
		return nil, err
	}
	deployed := hist.deployed
	if deployed != nil && hist.last == deployed {
		same, drops, err := unchanged(deployed.Manifest, manifest, stamped)
		if err != nil {
			return nil, err
		}
		if same != nil {
			if indexed {
				m.applied.remember(name, digest, records, deployed, len(deployed.Manifest), drops)
			}
			return &Result{Release: deployed, Upgraded: true, Objects: same}, nil
		}
	}
	res := &Result{Upgraded: deployed != nil}
	var previous []*unstructured.Unstructured
	if deployed != nil {
		if previous, err = decodeManifest(deployed.Manifest); err != nil {
			return res, err
		}
	}

	now := helmtime.Now()
	rel := &helmrelease.Release{
		Name:      name,
		Namespace: m.namespace,
		Chart:     emptyChart(name),
		Config:    map[string]any{},
		Manifest:  manifest,
		Version:   hist.maxVersion + 1,
		Info:      &helmrelease.Info{FirstDeployed: now, LastDeployed: now},
	}
	record := m.store.Create
	if deployed == nil {
		rel.SetStatus(helmrelease.StatusPendingInstall, "Install in progress")
		if err := m.records.fits(rel); err != nil {
			return res, fmt.Errorf("recording release %q: %w", name, err)
		}
	} else {
		rel.Info.FirstDeployed = deployed.Info.FirstDeployed
		rel.SetStatus(helmrelease.StatusPendingUpgrade, "Upgrade in progress")
		if err := m.store.Create(rel); err != nil {
			return res, fmt.Errorf("recording release %q: %w", name, err)
		}
		record = m.store.Update
	}
	res.Release = rel

	var dropped droppedSet
	applyErr := m.applyObjects(ctx, name, stamped, sent, previous, &dropped)
	res.Dropped = dropped.sorted()
	res.versions = dropped.versions
	if applyErr == nil && len(res.Dropped) > 0 {
		// The record holds what was applied, which drift correction and the
		// next Apply compare with.
		metrics.Step(metrics.StepRender)
		if rel.Manifest, err = Manifest(stamped, nil); err != nil {
			applyErr = err
		}
	}
	if applyErr == nil && len(res.Dropped) == 0 {
		labelRecorded(rel, digest)
	}
	switch {
	case applyErr != nil:
		rel.SetStatus(helmrelease.StatusFailed, applyErr.Error())
	case deployed != nil:
		rel.SetStatus(helmrelease.StatusDeployed, "Upgrade complete")
	default:
		rel.SetStatus(helmrelease.StatusDeployed, "Install complete")
	}
	if err := record(rel); err != nil {
		if deployed == nil && applyErr == nil && errors.Is(err, driver.ErrReleaseExists) {
			if theirs := m.recordedElsewhere(ctx, name, rel.Manifest); theirs != nil {
				res.Release, res.Changed, res.Objects = theirs, true, stamped
				return res, nil
			}
		}
		return res, errors.Join(applyErr, fmt.Errorf("recording release %q: %w", name, err))
	}
	if applyErr != nil {
		verb := "installing"
		if deployed != nil {
			verb = "upgrading"
		}
		return res, fmt.Errorf("%s release %q: %w", verb, name, applyErr)
	}
	if deployed != nil {
		deployed.SetStatus(helmrelease.StatusSuperseded, "Superseded by revision "+strconv.Itoa(rel.Version))
		if err := m.store.Update(deployed); err != nil {
			return res, fmt.Errorf("recording release %q: %w", name, err)
		}
	}
	m.pruneHistory(ctx, name, append(hist.all, rel))
	// The records as this Apply's writes left them: the next Apply of the
	// same objects needs neither render nor history once the informer
	// shows them.
	if records, ok := m.records.settle(name); ok {
		res.records, res.recordsKnown = records, true
		if len(res.Dropped) == 0 {
			m.applied.remember(name, digest, records, rel, len(rel.Manifest), nil)
		}
	}
	res.Changed = true
	res.Objects = stamped
	return res, nil
}

// recordedElsewhere returns the release's deployed revision if it is the
// last and holds manifest: a first install's revision that another process
// recorded while this one applied the same objects (a sharded
// BundleDeployment moved mid-install: the instance it left finishes the
// install it had begun while the one it joined installs it too; actions on
// one release are serialised within a process). Both applied what the
// record lists, so the release holds it; otherwise nil.
func (m *Manager) recordedElsewhere(ctx context.Context, name, manifest string) *helmrelease.Release {
	h, err := m.history(ctx, name)
	if err != nil || h.deployed == nil || h.last != h.deployed || h.deployed.Manifest != manifest {
		return nil
	}
	return h.deployed
}

// ownershipMetadata marks o as Helm marks a release's objects, so Helm's
// tooling (and Helm's uninstall) recognises it.
func (m *Manager) ownershipMetadata(o *unstructured.Unstructured, name string) {
	objmeta.Set(o, "labels", []string{helmManagedBy, "Helm"})
	// Only applyDropping says what was dropped.
	objmeta.Set(o, "annotations", []string{helmReleaseName, name, helmReleaseNamespace, m.namespace}, AnnotationDroppedFields)
}

// unchanged returns the objects a deployed release holds if applying
// stamped (rendered as manifest) would change nothing, else nil: the
// manifests are the same, or they are once the fields the deployed objects
// were applied without (drops, by object) are left out of stamped too.
func unchanged(deployed, manifest string, stamped []*unstructured.Unstructured) (same []*unstructured.Unstructured, drops map[string]string, err error) {
	if deployed == manifest {
		return stamped, nil, nil
	}
	legacy := !jsonManifest(deployed)
	if !legacy && !strings.Contains(deployed, AnnotationDroppedFields) {
		return nil, nil, nil
	}
	applied, err := decodeManifest(deployed)
	if err != nil {
		return nil, nil, err
	}
	if legacy {
		// Recorded as YAML by an earlier version: compared as the same
		// objects rendered today, so that upgrading the provisioner writes
		// no new revision of every release.
		metrics.Step(metrics.StepRender)
		if deployed, err = Manifest(applied, nil); err != nil {
			return nil, nil, err
		}
		if deployed == manifest {
			return stamped, nil, nil
		}
		if !strings.Contains(deployed, AnnotationDroppedFields) {
			return nil, nil, nil
		}
	}
	drops = recordedDrops(applied)
	carried := carryRecorded(stamped, drops)
	metrics.Step(metrics.StepRender)
	again, err := Manifest(carried, nil)
	if err != nil || again != deployed {
		return nil, nil, err
	}
	return carried, drops, nil
}

type history struct {
	all        []*helmrelease.Release
	last       *helmrelease.Release
	deployed   *helmrelease.Release
	maxVersion int
}

// history reads a release's records, marking any left pending by a crash as
// failed: since actions on one release are serialised in this process, a
// pending record seen here can only be such a leftover.
func (m *Manager) history(ctx context.Context, name string) (history, error) {
	metrics.Step(metrics.StepHistory)
	var h history
	all, err := m.store.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return h, nil
	}
	if err != nil {
		return h, fmt.Errorf("reading release %q: %w", name, err)
	}
	for _, r := range all {
		if r.Info.Status.IsPending() {
			log.FromContext(ctx).Info("recovering release left pending", "release", name, "status", r.Info.Status, "revision", r.Version)
			r.SetStatus(helmrelease.StatusFailed, fmt.Sprintf("recovered from interrupted %s", r.Info.Status))
			if err := m.store.Update(r); err != nil {
				return h, fmt.Errorf("recovering pending release %q: %w", name, err)
			}
		}
		if r.Version > h.maxVersion {
			h.maxVersion = r.Version
			h.last = r
		}
		if r.Info.Status == helmrelease.StatusDeployed && (h.deployed == nil || r.Version > h.deployed.Version) {
			h.deployed = r
		}
	}
	h.all = all
	return h, nil
}

// pruneHistory keeps the newest maxHistory records.
func (m *Manager) pruneHistory(ctx context.Context, name string, all []*helmrelease.Release) {
	if len(all) <= maxHistory {
		return
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Version > all[j].Version })
	for _, r := range all[maxHistory:] {
		if r.Info.Status == helmrelease.StatusDeployed {
			continue
		}
		if _, err := m.store.Delete(name, r.Version); err != nil {
			log.FromContext(ctx).Error(err, "pruning release history", "release", name, "revision", r.Version)
		}
	}
}

// Uninstall deletes every object any revision of the release lists that
// still carries the release's ownership metadata, then the release's
// records, and returns the objects it left alone because they are not the
// release's (any more). A missing release is not an error.
//
// Helm's action.Uninstall is not used: it deletes whatever the last
// revision's manifest lists, whoever owns it now, so a record listing
// someone else's objects (forged, or stale after another release took an
// object over) made it delete objects this release never owned. Records go
// last, so an uninstall interrupted half way is finished by the next one.
func (m *Manager) Uninstall(ctx context.Context, name string) ([]string, error) {
	defer m.lock(name)()
	m.applied.forget(name)
	hist, err := m.history(ctx, name)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var objs []*unstructured.Unstructured
	for _, r := range hist.all {
		decoded, err := decodeManifest(r.Manifest)
		if err != nil {
			return nil, err
		}
		for _, o := range decoded {
			if !seen[key(o)] {
				seen[key(o)] = true
				objs = append(objs, o)
			}
		}
	}
	var (
		mu   sync.Mutex
		kept []string
	)
	del := func(o *unstructured.Unstructured) error {
		k, err := m.DeleteIfOwned(ctx, o, name)
		if k != "" {
			mu.Lock()
			kept = append(kept, k)
			mu.Unlock()
		}
		return err
	}
	first, rest := servedFirst(objs)
	if err = parallel(first, del); err == nil {
		err = parallel(rest, del)
	}
	if err != nil {
		return kept, fmt.Errorf("uninstalling release %q: %w", name, err)
	}
	sort.Strings(kept)
	if len(kept) > 0 {
		log.FromContext(ctx).Info("uninstall left objects the release does not own", "release", name, "objects", kept)
	}
	for _, r := range hist.all {
		if _, err := m.store.Delete(name, r.Version); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
			return kept, fmt.Errorf("uninstalling release %q: deleting revision %d: %w", name, r.Version, err)
		}
	}
	return kept, nil
}

// Manifest renders objs as the manifest of a release record, in Helm's
// install order, after mutate (which may be nil) has stamped them; objs are
// left as they are. Each object is one document of compact JSON (sorted
// keys, as YAML renderers sort them): JSON is YAML, so Helm and kubectl
// read it as they read any manifest, and it costs a tenth of rendering YAML
// (yaml.v2's emitter allocated ~100 bytes per byte of manifest, the largest
// cost of installing a fleet of operators) and decodes without a YAML
// parser (decodeManifest).
func Manifest(objs []*unstructured.Unstructured, mutate func(*unstructured.Unstructured)) (string, error) {
	manifest, _, err := render(objs, mutate, false)
	return manifest, err
}

// bodies are objects' documents in a manifest, by object: the JSON an
// apply of each sends. They share the manifest's bytes, which nothing
// changes, and hold for an object only while it is not changed either.
type bodies map[*unstructured.Unstructured][]byte

// render is Manifest, also returning, if withBodies, each object's
// document (without its newline). An install sent the same JSON again as
// its apply bodies, encoding every object twice: as many bytes again as
// its content. The documents are written without HTML escapes, which an
// apply body may hold as well as the same JSON with them.
func render(objs []*unstructured.Unstructured, mutate func(*unstructured.Unstructured), withBodies bool) (string, bodies, error) {
	sorted := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if mutate != nil {
			// Only a mutate needs a copy: rendering reads o.
			o = o.DeepCopy()
			mutate(o)
		}
		sorted = append(sorted, o)
	}
	order := map[string]int{}
	for i, k := range releaseutil.InstallOrder {
		order[k] = i
	}
	rank := func(k string) int {
		if r, ok := order[k]; ok {
			return r
		}
		return len(order)
	}
	sort.SliceStable(sorted, func(i, j int) bool { return rank(sorted[i].GetKind()) < rank(sorted[j].GetKind()) })

	// A json.Encoder's output without HTML escapes ("<" stays "<", as in
	// the bundle) and a newline after each, written once at its size.
	size := 0
	for _, o := range sorted {
		size += len(docSeparator) + jsonmap.Size(o.Object) + 1
	}
	var docs bodies
	if withBodies {
		docs = make(bodies, len(sorted))
	}
	out := make([]byte, 0, size)
	for _, o := range sorted {
		out = append(out, docSeparator...)
		start := len(out)
		var err error
		if out, err = jsonmap.Append(out, o.Object); err != nil {
			return "", nil, fmt.Errorf("rendering %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		if docs != nil {
			// Full: an append to a body cannot write into the next.
			docs[o] = out[start:len(out):len(out)]
		}
		out = append(out, '\n')
	}
	// The manifest is written once, at its size, and never changed after:
	// made a string without a copy (as strings.Builder does).
	return unsafe.String(unsafe.SliceData(out), len(out)), docs, nil
}

// jsonManifest reports whether manifest is in Manifest's format. Releases
// recorded by earlier versions hold YAML documents.
func jsonManifest(manifest string) bool {
	return manifest == "" || strings.HasPrefix(manifest, docSeparator+"{")
}

const docSeparator = "---\n"

// emptyChart is the chart a release record names: a chart without
// templates, since a bundle's objects are applied as they are and never run
// through Go templates (a literal "{{" in a ConfigMap stays a literal).
func emptyChart(name string) *chart.Chart {
	return &chart.Chart{Metadata: &chart.Metadata{
		APIVersion: chart.APIVersionV2,
		Name:       name,
		Version:    "0.0.0",
	}}
}
