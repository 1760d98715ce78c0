// Package release installs a BundleDeployment's objects as a Helm release
// (one release per BundleDeployment) with Helm's action library, and
// recovers releases a crash left half done.
package release

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/kube"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"
)

// maxHistory bounds the release revisions kept per BundleDeployment.
const maxHistory = 5

// Manager installs, upgrades and uninstalls releases whose records live in
// one namespace.
type Manager struct {
	getter    *restGetter
	client    client.Client
	namespace string
	store     *storage.Storage
	kube      *kube.Client

	// mu serialises actions on one release: Helm's own lock is a release
	// status, which a crash can leave behind.
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// NewManager keeps release records as Secrets in namespace; objects without
// a namespace of their own are installed there too.
func NewManager(cfg *rest.Config, namespace string) (*Manager, error) {
	cfg = rest.CopyConfig(cfg)
	// Helm sends one request per object; client-side throttling would make a
	// 1,000-object bundle take minutes. The API server's own priority and
	// fairness protects it.
	cfg.QPS, cfg.Burst = -1, -1
	getter, err := newRESTGetter(cfg, namespace)
	if err != nil {
		return nil, fmt.Errorf("creating discovery client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating clientset: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	kc := kube.New(getter)
	kc.Namespace = namespace
	d := driver.NewSecrets(cs.CoreV1().Secrets(namespace))
	return &Manager{
		namespace: namespace,
		getter:    getter,
		store:     storage.Init(d),
		kube:      kc,
		locks:     map[string]*sync.Mutex{},
		client:    c,
	}, nil
}

// Namespace holds the release records and objects installed without a
// namespace of their own.
func (m *Manager) Namespace() string { return m.namespace }

func (m *Manager) lock(name string) func() {
	m.mu.Lock()
	l, ok := m.locks[name]
	if !ok {
		l = &sync.Mutex{}
		m.locks[name] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (m *Manager) config(ctx context.Context) *action.Configuration {
	logger := log.FromContext(ctx).WithName("helm").V(1)
	return &action.Configuration{
		RESTClientGetter: m.getter,
		Releases:         m.store,
		KubeClient:       m.kube,
		Log:              func(format string, v ...any) { logger.Info(fmt.Sprintf(format, v...)) },
	}
}

// Result says what Apply did.
type Result struct {
	Release *helmrelease.Release
	// Upgraded is true when the release existed before.
	Upgraded bool
	// Changed is false when the release already had this exact manifest.
	Changed bool
}

// Apply makes the release name hold exactly objs. labels are stamped on
// every object (owner labels); owner, when set, becomes each object's
// controller reference.
func (m *Manager) Apply(ctx context.Context, name string, objs []*unstructured.Unstructured, mutate func(*unstructured.Unstructured)) (*Result, error) {
	defer m.lock(name)()

	manifest, err := Manifest(objs, mutate)
	if err != nil {
		return nil, err
	}
	cfg := m.config(ctx)
	current, err := m.recover(ctx, name)
	if err != nil {
		return nil, err
	}
	if current != nil && current.Info.Status == helmrelease.StatusDeployed && current.Manifest == manifest {
		return &Result{Release: current, Upgraded: true}, nil
	}
	if err := m.preinstallCRDs(ctx, name, objs, mutate); err != nil {
		return &Result{Upgraded: current != nil}, err
	}
	chrt := emptyChart(name)
	pr := postRenderer(manifest)

	if current == nil {
		in := action.NewInstall(cfg)
		in.ReleaseName = name
		in.Namespace = m.kube.Namespace
		in.DisableOpenAPIValidation = true
		in.SkipCRDs = true
		in.PostRenderer = pr
		// A release whose only revisions were uninstalled or failed keeps
		// its name; Replace reuses it.
		in.Replace = true
		rel, err := in.RunWithContext(ctx, chrt, nil)
		m.getter.Reset()
		if err != nil {
			return &Result{Release: rel}, fmt.Errorf("installing release %q: %w", name, err)
		}
		return &Result{Release: rel, Changed: true}, nil
	}

	up := action.NewUpgrade(cfg)
	up.Namespace = m.kube.Namespace
	up.DisableOpenAPIValidation = true
	up.MaxHistory = maxHistory
	up.PostRenderer = pr
	rel, err := up.RunWithContext(ctx, name, chrt, nil)
	m.getter.Reset()
	if err != nil {
		return &Result{Release: rel, Upgraded: true}, fmt.Errorf("upgrading release %q: %w", name, err)
	}
	return &Result{Release: rel, Upgraded: true, Changed: true}, nil
}

// recover returns the last release named name, or nil. A release left
// pending by a crash (the process died mid-install or mid-upgrade) would
// block every later action with "another operation is in progress"; since
// actions on one release are serialised in this process, a pending release
// seen here is always such a leftover, and is marked failed so the next
// action supersedes it.
func (m *Manager) recover(ctx context.Context, name string) (*helmrelease.Release, error) {
	last, err := m.store.Last(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading release %q: %w", name, err)
	}
	if last.Info.Status.IsPending() {
		log.FromContext(ctx).Info("recovering release left pending", "release", name, "status", last.Info.Status, "revision", last.Version)
		last.SetStatus(helmrelease.StatusFailed, fmt.Sprintf("recovered from interrupted %s", last.Info.Status))
		if err := m.store.Update(last); err != nil {
			return nil, fmt.Errorf("recovering pending release %q: %w", name, err)
		}
	}
	if last.Info.Status == helmrelease.StatusUninstalled {
		return nil, nil
	}
	if last.Info.Status == helmrelease.StatusFailed && last.Version == 1 {
		// A first install that failed has nothing to upgrade from; Install
		// with Replace takes over its name.
		return nil, nil
	}
	return last, nil
}

// Get returns the deployed release named name, or nil.
func (m *Manager) Get(name string) (*helmrelease.Release, error) {
	rel, err := m.store.Deployed(name)
	if errors.Is(err, driver.ErrReleaseNotFound) || errors.Is(err, driver.ErrNoDeployedReleases) {
		return nil, nil
	}
	if err != nil && strings.Contains(err.Error(), "has no deployed releases") {
		return nil, nil
	}
	return rel, err
}

// Uninstall removes the release and every object it installed. A missing
// release is not an error.
func (m *Manager) Uninstall(ctx context.Context, name string) error {
	defer m.lock(name)()
	if _, err := m.recover(ctx, name); err != nil {
		return err
	}
	un := action.NewUninstall(m.config(ctx))
	un.IgnoreNotFound = true
	if _, err := un.Run(name); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return fmt.Errorf("uninstalling release %q: %w", name, err)
	}
	return nil
}

// Manifest renders objs as one YAML stream in Helm's install order, after
// mutate (which may be nil) has stamped them.
func Manifest(objs []*unstructured.Unstructured, mutate func(*unstructured.Unstructured)) (string, error) {
	sorted := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		o = o.DeepCopy()
		if mutate != nil {
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

	var buf bytes.Buffer
	for _, o := range sorted {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return "", fmt.Errorf("rendering %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return buf.String(), nil
}

// emptyChart is a chart without templates: the objects come from the
// post-renderer, so bundle content is never run through Go templates (a
// literal "{{" in a ConfigMap must stay a literal).
func emptyChart(name string) *chart.Chart {
	return &chart.Chart{Metadata: &chart.Metadata{
		APIVersion: chart.APIVersionV2,
		Name:       name,
		Version:    "0.0.0",
	}}
}

type manifestRenderer string

func (m manifestRenderer) Run(*bytes.Buffer) (*bytes.Buffer, error) {
	return bytes.NewBufferString(string(m)), nil
}

func postRenderer(manifest string) manifestRenderer { return manifestRenderer(manifest) }
