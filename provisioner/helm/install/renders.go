package install

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/sizedlru"
	"github.com/rukpak-dev/rukpak/provisioner/helm"
	"github.com/rukpak-dev/rukpak/provisioner/metrics"
)

// A chart's templates run once per install or upgrade: the checks before
// it (Render: the permission and CRD upgrade preflights, the approval
// preview) and the action itself (Install) use the same frozen chart
// (helm.Action), rendered in the bounded child process for the action
// that runs next: its .Release (install or upgrade, the next revision),
// the cluster's capabilities, lookups as the identity the action acts as.
// The frozen chart is kept until that action ran, keyed by everything the
// render depends on, so a reconcile that stops at a check, or a render
// that was refused (over a limit, a template error), does not render
// again on every retry: only once an input changes, a revision is
// recorded, the reconcile-requested-at annotation changes, or RetryAfter
// passed (lookups read the cluster, which may have changed since: a
// lookup refused for lack of permissions, say).

// renderKey is what a render depends on besides the cluster's objects a
// lookup reads.
type renderKey struct {
	release string
	// digest is the inputs' (chart, values, namespace).
	digest string
	// last and deployed are the release's newest and deployed revisions
	// (0 for none): install or upgrade, and the next revision's number.
	last, deployed int
	// user is who lookups read as ("": the provisioner).
	user string
	// caps digests the cluster's capabilities.
	caps string
	// requested is the BundleDeployment's reconcile-requested-at
	// annotation: a requested reconcile renders again.
	requested string
}

// renders keeps frozen charts and refused renders, least recently used
// dropped first beyond maxRenders entries or maxRenderBytes of rendered
// text.
type renders struct {
	lru *sizedlru.Cache[renderKey, *renderEntry]
}

type renderEntry struct {
	action *helm.Action
	err    error
	at     time.Time
	size   int64
}

const (
	maxRenders = 256
	// maxRenderBytes holds the largest render the child may return
	// (helm.DefaultSandboxLimits.Output).
	maxRenderBytes = 32 << 20
)

func newRenders() *renders {
	return &renders{lru: sizedlru.New[renderKey, *renderEntry](sizedlru.Limits{MaxBytes: maxRenderBytes, MaxEntries: maxRenders})}
}

// get returns the render kept for k, if younger than ttl.
func (c *renders) get(k renderKey, ttl time.Duration) (*renderEntry, bool) {
	e, ok := c.lru.Get(k)
	if !ok {
		return nil, false
	}
	if time.Since(e.at) >= ttl {
		c.lru.Remove(k)
		return nil, false
	}
	return e, true
}

// put keeps a render for k: an action or the error it was refused with;
// renders older than ttl go.
func (c *renders) put(k renderKey, a *helm.Action, err error, ttl time.Duration) {
	e := &renderEntry{action: a, err: err, at: time.Now(), size: 512}
	if a != nil {
		e.size += a.Size()
	}
	if err != nil {
		e.size += int64(len(err.Error()))
	}
	c.lru.RemoveFunc(func(_ renderKey, e *renderEntry) bool { return time.Since(e.at) >= ttl })
	c.lru.Add(k, e, e.size)
}

// forget drops what is kept for release name: its action ran, or it is
// uninstalled.
func (c *renders) forget(name string) {
	c.lru.RemoveFunc(func(k renderKey, _ *renderEntry) bool { return k.release == name })
}

// rendersInit guards creating an Installer's renders.
var rendersInit sync.Mutex

// cache returns the Installer's renders, shared with the Installers As
// returns.
func (in *Installer) cache() *renders {
	rendersInit.Lock()
	defer rendersInit.Unlock()
	if in.renders == nil {
		in.renders = newRenders()
	}
	return in.renders
}

// prepare returns the chart of next frozen for the action that installs
// it after last (the newest revision) and deployed: an install when
// nothing is deployed, else an upgrade to last's revision + 1. It renders
// in the child only when no render of the same key is kept, and keeps
// what it rendered, or the verdict of a refused render.
func (in *Installer) prepare(ctx context.Context, bd *rukpakv1alpha1.BundleDeployment, next *inputs, last, deployed *helmrelease.Release) (*helm.Action, error) {
	name := bd.Name
	getter := in.Releases.ActionConfig(ctx, nil).RESTClientGetter
	dc, err := getter.ToDiscoveryClient()
	if err != nil {
		return nil, fmt.Errorf("creating a discovery client: %w", err)
	}
	caps, err := helm.Capabilities(dc, nil)
	if err != nil {
		return nil, err
	}
	// Discovery lists API versions in no particular order.
	sorted := *caps
	sorted.APIVersions = slices.Sorted(slices.Values(caps.APIVersions))
	capsJSON, err := json.Marshal(&sorted)
	if err != nil {
		return nil, fmt.Errorf("digesting the cluster's capabilities: %w", err)
	}
	sum := sha256.Sum256(capsJSON)
	key := renderKey{release: name, digest: next.digest, user: in.user, caps: hex.EncodeToString(sum[:]),
		requested: bd.Annotations[rukpakv1alpha1.AnnotationReconcileRequestedAt]}
	if last != nil {
		key.last = last.Version
	}
	if deployed != nil {
		key.deployed = deployed.Version
	}
	c := in.cache()
	if e, ok := c.get(key, in.retryAfter()); ok {
		return e.action, e.err
	}
	v, err := in.run(ctx, name, key, false, fmt.Sprintf("rendering chart %q", next.chart.Name()), func(ctx context.Context, j *job) (any, error) {
		a, err := helm.PrepareAction(ctx, getter, caps, next.chart, next.values, helm.ActionInput{
			Release: name, Namespace: next.cfg.InstallNamespace, Last: last, Deployed: deployed,
			Lookup: &helm.LookupGuard{Forbidden: in.Releases.Namespace()}, User: in.user,
			Owner: name, Slow: func() {
				j.setStatus(fmt.Sprintf("rendering chart %q in the slow lane: its renders take longer than the fast lane allows", next.chart.Name()))
				j.goneSlow()
			},
		}, helm.SandboxLimits{})
		switch {
		case err == nil:
			metrics.HelmRendered(name, true)
			c.put(key, a, nil, in.retryAfter())
		case helm.Refused(err):
			metrics.HelmRendered(name, false)
			c.put(key, nil, err, in.retryAfter())
		}
		return a, err
	})
	a, _ := v.(*helm.Action)
	return a, err
}
