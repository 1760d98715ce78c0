package release

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rukpak-dev/rukpak/internal/jsonskim"
	"github.com/rukpak-dev/rukpak/internal/leanclient"
	"github.com/rukpak-dev/rukpak/internal/memomapper"
)

// Helm's ownership metadata: an existing object carrying it for this release
// is adopted by an install instead of failing it.
const (
	helmReleaseName      = "meta.helm.sh/release-name"
	helmReleaseNamespace = "meta.helm.sh/release-namespace"
	helmManagedBy        = "app.kubernetes.io/managed-by"
)

// crdEstablishTimeout bounds the wait for a bundle's own CRDs.
const crdEstablishTimeout = time.Minute

// waitEstablished waits until every CRD in crds serves its kind, then drops
// cached discovery so the kinds they define can be mapped, and waits until
// those in used are (the client's mapper rebuilds itself whole on each new
// group, so kinds nothing applies are left to be mapped when first asked
// for). It decodes only
// the CRDs' metadata and conditions (crdEstablished), with m's own
// identity: waiting grants the installing identity nothing. Where each was
// read Established goes to applied (droppedSet.established).
func (m *Manager) waitEstablished(ctx context.Context, crds []*unstructured.Unstructured, used map[schema.GroupKind]bool, applied *droppedSet) error {
	for _, crd := range crds {
		name := crd.GetName()
		waitCtx, cancel := context.WithTimeout(ctx, crdEstablishTimeout)
		version, created := applied.version(crd)
		seen, err := m.untilEstablished(waitCtx, name, version, created)
		cancel()
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", name, err)
		}
		if applied != nil {
			applied.established(crd, seen)
		}
	}
	if len(crds) > 0 {
		m.getter.Reset()
		// The client's mappings of these CRDs' groups too: a CRD created
		// again may serve other versions or another scope.
		switch r := m.client.RESTMapper().(type) {
		case *memomapper.Mapper:
			groups := make([]string, 0, len(crds))
			for _, crd := range crds {
				groups = append(groups, crdKind(crd).Group)
			}
			r.Forget(groups...)
		case meta.ResettableRESTMapper:
			r.Reset()
		}
	}
	for _, crd := range crds {
		if !used[crdKind(crd)] {
			continue
		}
		if err := m.waitMapped(ctx, crd); err != nil {
			return err
		}
	}
	return nil
}

// waitMapped waits until the client maps the kind crd defines: discovery
// may serve it a moment after the CRD is Established (on a busy API
// server, seconds), and the objects of that kind, applied next, are
// mapped first (their scope, the ownership check's read).
func (m *Manager) waitMapped(ctx context.Context, crd *unstructured.Unstructured) error {
	gk := crdKind(crd)
	group, kind := gk.Group, gk.Kind
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	version := ""
	for _, v := range versions {
		if v, ok := v.(map[string]any); ok && v["served"] == true {
			version, _ = v["name"].(string)
			break
		}
	}
	if group == "" || kind == "" || version == "" {
		return nil // nothing served to map; the API server judged the CRD
	}
	delay := wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Cap: time.Second, Steps: math.MaxInt32}.DelayFunc()
	waitCtx, cancel := context.WithTimeout(ctx, crdEstablishTimeout)
	defer cancel()
	var last error
	err := delay.Until(waitCtx, true, false, func(context.Context) (bool, error) {
		m.ForgetMissing(group) // each poll asks the API server
		_, last = m.client.RESTMapper().RESTMapping(gk, version)
		return last == nil, nil
	})
	if err != nil {
		if last != nil {
			err = last
		}
		return fmt.Errorf("waiting for the kind %s of CRD %s to be served: %w", kind, crd.GetName(), err)
	}
	return nil
}

// untilEstablished reads the CRD called name until it is Established.
// A CRD is established by two status updates after its apply (names
// accepted, then established), which take milliseconds on an idle API
// server and seconds beside hundreds of other CRDs: polled on a timer,
// each CRD was read two or three times, its whole schema sent each time.
// With the cache of installed objects (WatchCRDsIn), a CRD the apply
// created (at version applied) is read only once the cache has seen a
// version other than those already read, or after crdQuiet without one (a
// cache behind); a CRD the cache has not seen at all (not labelled as
// installed, or not yet) is read on a timer from 50 ms to 1 s, as without
// the cache. One the apply did not create is read at once: it is most
// likely Established already, and an unchanged or updated CRD may see no
// new version at all.
func (m *Manager) untilEstablished(ctx context.Context, name, applied string, created bool) (*crdSeen, error) {
	delay := wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Cap: time.Second, Steps: math.MaxInt32}.DelayFunc()
	w := m.crdVersions.watch(ctx, name)
	if w == nil {
		var seen *crdSeen
		err := delay.Until(ctx, true, false, func(ctx context.Context) (bool, error) {
			var established bool
			var err error
			seen, established, err = m.crdEstablished(ctx, name)
			return established, err
		})
		return seen, err
	}
	defer m.crdVersions.unwatch(name)
	known := []string{applied}
	for first := true; ; first = false {
		before := ""
		if !first || created {
			before = m.crdVersions.await(ctx, w, known, delay())
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		seen, established, err := m.crdEstablished(ctx, name)
		if err != nil || established {
			return seen, err
		}
		// Versions seen already: the one read, and the one the cache
		// had seen before it (its event may come after the read).
		known = append(known[:0], before)
		if seen != nil {
			known = append(known, seen.ResourceVersion)
		}
	}
}

// crdQuiet is how long untilEstablished waits for the cache to see a
// CRD's next version before reading it anyway.
const crdQuiet = time.Second

// crdVersions follows, for waitEstablished, the versions of the CRDs
// being waited for, as the informer of a cache of installed CRDs' metadata
// sees them (shared with the views As returns).
type crdVersions struct {
	mu sync.Mutex
	// cache is where watch seeds a CRD's version from; nil: no cache.
	cache client.Reader
	// awaited are the CRDs waited for, by name: only they are followed.
	awaited map[string]*crdWatch
	// quiet is crdQuiet but in tests.
	quiet time.Duration
}

// crdWatch is a CRD followed while someone waits for it.
type crdWatch struct {
	rv      string
	waiters int
	// changed is closed, and replaced, on every change of rv.
	changed chan struct{}
}

// WatchCRDsIn has waitEstablished read a CRD only once installed, the
// cache of the metadata of release-owned objects
// (bundledeployment.NewInstalledCache), has seen it change.
func (m *Manager) WatchCRDsIn(ctx context.Context, installed cache.Cache) error {
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	inf, err := installed.GetInformer(ctx, crd)
	if err != nil {
		return fmt.Errorf("watching CRDs: %w", err)
	}
	v := m.crdVersions
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { v.observe(obj) },
		UpdateFunc: func(_, obj any) { v.observe(obj) },
	}); err != nil {
		return fmt.Errorf("watching CRDs: %w", err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.cache = installed
	return nil
}

// observe notes a CRD's version, if it is waited for.
func (v *crdVersions) observe(obj any) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if w := v.awaited[o.GetName()]; w != nil && w.rv != o.GetResourceVersion() {
		w.rv = o.GetResourceVersion()
		close(w.changed)
		w.changed = make(chan struct{})
	}
}

// watch follows the CRD called name until unwatch, from the version the
// cache holds now; nil without a cache.
func (v *crdVersions) watch(ctx context.Context, name string) *crdWatch {
	if v == nil {
		return nil
	}
	v.mu.Lock()
	c := v.cache
	w := v.awaited[name]
	if c != nil && w == nil {
		w = &crdWatch{changed: make(chan struct{})}
		if v.awaited == nil {
			v.awaited = map[string]*crdWatch{}
		}
		v.awaited[name] = w
	}
	if w != nil {
		w.waiters++
	}
	v.mu.Unlock()
	if c == nil {
		return nil
	}
	// Seeded after it is followed, so no change falls between: the
	// informer's entry, read without a copy.
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err == nil {
		v.observe(crd)
	}
	return w
}

func (v *crdVersions) unwatch(name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if w := v.awaited[name]; w != nil {
		if w.waiters--; w.waiters == 0 {
			delete(v.awaited, name)
		}
	}
}

// await waits until w's CRD is at a version not in known, and returns the
// version it is at ("" when the cache has not seen it). It waits at most
// crdQuiet, or uncached while the cache has not seen the CRD.
func (v *crdVersions) await(ctx context.Context, w *crdWatch, known []string, uncached time.Duration) string {
	quiet := v.quiet
	if quiet == 0 {
		quiet = crdQuiet
	}
	start := time.Now()
	timer := time.NewTimer(uncached)
	defer timer.Stop()
	for {
		v.mu.Lock()
		rv, changed := w.rv, w.changed
		v.mu.Unlock()
		if rv != "" && !slices.Contains(known, rv) {
			return rv
		}
		limit := quiet
		if rv == "" {
			limit = uncached
		}
		left := limit - time.Since(start)
		if left <= 0 {
			return rv
		}
		timer.Reset(left)
		select {
		case <-ctx.Done():
			return rv
		case <-timer.C:
		case <-changed:
		}
	}
}

// crdKind is the kind crd defines.
func crdKind(crd *unstructured.Unstructured) schema.GroupKind {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	return schema.GroupKind{Group: group, Kind: kind}
}

// maxCRDBody bounds a CRD read while waiting for it: etcd holds objects
// of at most 1.5 MiB, which JSON makes at most a few times larger.
const maxCRDBody = 16 << 20

// maxCRDDepth bounds the nesting of a CRD read while waiting for it, as the
// API server bounds what it decodes.
const maxCRDDepth = 10000

// crdReaders read CRD bodies, which are skimmed (jsonskim): none is held
// whole.
var crdReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}

// crdSkims hold what is kept of a CRD body: its metadata without managed
// fields, and its status. One grown past keepCRDSkim (annotations of
// hundreds of kilobytes) is dropped, not kept.
var crdSkims = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

const keepCRDSkim = 64 << 10

// bodyLimit reads at most n bytes of r, and errBodyTooLarge past them.
type bodyLimit struct {
	r io.Reader
	n int64
}

var errBodyTooLarge = errors.New("body too large")

func (l *bodyLimit) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errBodyTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// crdKept is what crdEstablished reads of a CRD.
var crdKept = jsonskim.Members{"metadata": {"managedFields"}, "status": nil}

// crdSeen is the metadata of a CRD read Established.
type crdSeen struct {
	ResourceVersion   string            `json:"resourceVersion"`
	UID               types.UID         `json:"uid"`
	Generation        int64             `json:"generation"`
	DeletionTimestamp *metav1.Time      `json:"deletionTimestamp"`
	Labels            map[string]string `json:"labels"`
	Annotations       map[string]string `json:"annotations"`
	// namesRefused: NamesAccepted is False (an upgrade's names clash),
	// which kstatus judges failed whatever Established says.
	namesRefused bool
}

// crdResource is CRDs' group and resource, for errors.
var crdResource = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions").GroupResource()

// crdEstablished reads the metadata of the CRD called name (nil while it
// does not exist) and whether it is Established. It decodes the
// conditions and metadata alone: a CRD's schema can be megabytes, which
// decoding whole on every poll made the largest cost of installing CRDs
// after rendering.
func (m *Manager) crdEstablished(ctx context.Context, name string) (*crdSeen, bool, error) {
	if err := leanclient.CheckName(name); err != nil {
		return nil, false, fmt.Errorf("CRD %q: %w", name, err)
	}
	// A lean request: a CRD is polled a few times while it is established.
	rc, err := m.own.Open(ctx, "/apis/"+apiextensionsv1.SchemeGroupVersion.String()+"/customresourcedefinitions/"+leanclient.PathSegment(name), crdResource, name)
	if err != nil {
		return nil, false, client.IgnoreNotFound(err)
	}
	defer rc.Close() //nolint:errcheck // read to its object's end or failed
	// Skimmed as it streams in: a poll holds the CRD's metadata and status,
	// not its schema (megabytes, on every poll).
	br := crdReaders.Get().(*bufio.Reader)
	br.Reset(&bodyLimit{r: rc, n: maxCRDBody})
	defer func() {
		br.Reset(nil)
		crdReaders.Put(br)
	}()
	kept := crdSkims.Get().(*[]byte)
	defer func() {
		if cap(*kept) <= keepCRDSkim {
			crdSkims.Put(kept)
		}
	}()
	*kept, err = jsonskim.Object((*kept)[:0], br, crdKept, maxCRDDepth)
	if errors.Is(err, errBodyTooLarge) {
		return nil, false, fmt.Errorf("reading CRD %s: larger than %d MiB", name, maxCRDBody>>20)
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading CRD %s: %w", name, err)
	}
	// The rest (a newline) read too, so that the connection is reused.
	_, _ = br.WriteTo(io.Discard)
	body := *kept
	var crd struct {
		Metadata crdSeen `json:"metadata"`
		Status   struct {
			Conditions []struct {
				Type   apiextensionsv1.CustomResourceDefinitionConditionType `json:"type"`
				Status apiextensionsv1.ConditionStatus                       `json:"status"`
			} `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &crd); err != nil {
		return nil, false, fmt.Errorf("decoding CRD %s: %w", name, err)
	}
	established := false
	for _, c := range crd.Status.Conditions {
		switch {
		case c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue:
			established = true
		case c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse:
			crd.Metadata.namesRefused = true
		}
	}
	return &crd.Metadata, established, nil
}
