package provisioner_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testcatalog"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/provisioner"
	"github.com/rukpak-dev/rukpak/provisioner/conditions"
	"github.com/rukpak-dev/rukpak/storage"
)

// maxTestPackageBytes bounds a package document in these tests: kube-green's
// (~80 KB) fits, the bloated copy's does not.
const maxTestPackageBytes = 512 << 10

// catalogSourceHarness serves Catalogs over HTTPS and resolves catalog
// sources by reading them there, as a provisioner in another process does.
func catalogSourceHarness(t *testing.T) *harness {
	store := &storage.CatalogStore{RootDirectory: t.TempDir()}
	srv := httptest.NewTLSServer(storage.NewCatalogHandler(store))
	t.Cleanup(srv.Close)
	store.BaseURL = srv.URL
	return newHarnessWith(t, func(o *provisioner.Options) {
		o.Catalogs = store
		o.CatalogReader = &storage.CatalogClient{BaseURL: srv.URL, Client: srv.Client()}
		o.MaxCatalogPackageBytes = maxTestPackageBytes
	})
}

// kubeGreenCatalog pushes kube-green's real registry+v1 bundles to the test
// registry and returns a copy of its real catalog whose bundle images name
// them by digest (shared test data is never changed).
func (h *harness) kubeGreenCatalog() string {
	h.t.Helper()
	dir := filepath.Join(testcatalog.Dir(), "kube-green")
	catalog := realCatalog(h.t, "kube-green")
	// Each olm.bundle document names its image once at the top level, and
	// again among its relatedImages.
	imageOf := map[string]string{}
	for _, doc := range strings.Split(catalog, "\n---\n") {
		if !strings.Contains(doc, "\nschema: olm.bundle") {
			continue
		}
		name := regexp.MustCompile(`(?m)^name: kube-green\.v(\S+)$`).FindStringSubmatch(doc)
		img := regexp.MustCompile(`(?m)^image: (\S+)$`).FindStringSubmatch(doc)
		if name == nil || img == nil {
			h.t.Fatalf("bundle document without name or image:\n%.300s", doc)
		}
		imageOf[name[1]] = img[1]
	}
	if len(imageOf) != 10 {
		h.t.Fatalf("found %d bundles in the catalog, want 10", len(imageOf))
	}
	for version, upstream := range imageOf {
		ref := h.reg.MustPush(h.t, h.reg.Ref("kube-green-bundle:v"+version), testregistry.Image(h.t, testregistry.LayerFromDir(h.t, filepath.Join(dir, "bundles", version), "")))
		catalog = strings.ReplaceAll(catalog, upstream, ref)
	}
	return catalog
}

// serveCatalog makes Catalog name serve content (from a new immutable
// ConfigMap), creating the Catalog or pointing it at the new content, and
// waits until it serves it.
func (h *harness) serveCatalog(name, content string, labels map[string]string) *rukpakv1alpha1.Catalog {
	h.t.Helper()
	ctx := context.Background()
	cmName := fmt.Sprintf("%s-%d", name, len(content))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cmName, Namespace: namespace}, Data: map[string]string{"catalog.yaml": content}, Immutable: ptr.To(true)}
	testenv.MustNotError(h.t, h.c.Create(ctx, cm), "creating ConfigMap %s", cmName)
	src := rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps, ConfigMaps: []rukpakv1alpha1.ConfigMapSource{{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: cmName}}}}
	c := &rukpakv1alpha1.Catalog{}
	err := h.c.Get(ctx, client.ObjectKey{Name: name}, c)
	if err == nil {
		testenv.MustNotError(h.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := h.c.Get(ctx, client.ObjectKey{Name: name}, c); err != nil {
				return err
			}
			c.Spec.Source = src
			return h.c.Update(ctx, c)
		}), "updating catalog %s", name)
	} else {
		c = &rukpakv1alpha1.Catalog{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: rukpakv1alpha1.CatalogSpec{Source: src}}
		testenv.MustNotError(h.t, h.c.Create(ctx, c), "creating catalog %s", name)
	}
	eventually(h.t, "catalog "+name+" serves "+cmName, func() error {
		if err := h.c.Get(ctx, client.ObjectKey{Name: name}, c); err != nil {
			return err
		}
		rs := c.Status.ResolvedSource
		if rs == nil || len(rs.ConfigMaps) != 1 || rs.ConfigMaps[0].ConfigMap.Name != cmName || !conditions.Is(c.Status.Conditions, rukpakv1alpha1.TypeServing, metav1.ConditionTrue) {
			return fmt.Errorf("status %+v", c.Status)
		}
		return nil
	})
	return c
}

func catalogBD(name string, src *rukpakv1alpha1.CatalogSource, ca []byte) *rukpakv1alpha1.BundleDeployment {
	src.CertificateData = string(ca)
	bd := newBD(name, rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeCatalog, Catalog: src})
	bd.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	bd.Spec.Template.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	return bd
}

// waitCatalogInstalled waits until bd has installed the catalog bundle of
// version, and returns it.
func (h *harness) waitCatalogInstalled(name, version string) *rukpakv1alpha1.BundleDeployment {
	h.t.Helper()
	var bd *rukpakv1alpha1.BundleDeployment
	eventually(h.t, fmt.Sprintf("%s installs version %s", name, version), func() error {
		bd = h.bd(name)
		st := bd.Status.Catalog
		if st == nil || st.Installed == nil || st.Installed.Version != version ||
			!conditions.Is(bd.Status.Conditions, rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue) || bd.Status.PendingBundle != "" {
			return fmt.Errorf("status.catalog %+v, active %q, conditions %+v", st, bd.Status.ActiveBundle, bd.Status.Conditions)
		}
		return nil
	})
	return bd
}

func TestIntegrationCatalogSources(t *testing.T) {
	t.Parallel()
	h := catalogSourceHarness(t)
	ctx := context.Background()
	kubeGreen := h.kubeGreenCatalog()
	h.serveCatalog("operators", kubeGreen, map[string]string{"tier": "community"})

	// An older version by a range, as OLM v1 users write it.
	bd := catalogBD("kg", &rukpakv1alpha1.CatalogSource{PackageName: "kube-green", Version: "0.5.x",
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "community"}}}, h.reg.CAPEM)
	testenv.MustNotError(t, h.c.Create(ctx, bd), "creating bundle deployment kg")
	got := h.waitCatalogInstalled("kg", "0.5.2")
	first := got.Status.ActiveBundle
	in := got.Status.Catalog.Installed
	if in.Name != "kube-green.v0.5.2" || in.Catalog != "operators" || in.Package != "kube-green" || !strings.Contains(in.Image, "@sha256:") ||
		strings.Join(in.Channels, ",") != "alpha" {
		t.Fatalf("status.catalog.installed %+v", in)
	}
	b := h.bundle(first)
	if b.Spec.Source.Type != rukpakv1alpha1.SourceTypeImage || b.Spec.Source.Image.Ref != in.Image {
		t.Fatalf("generated bundle's source %+v, want the resolved image %s", b.Spec.Source, in.Image)
	}
	h.waitBD("kg", rukpakv1alpha1.TypeResolved, metav1.ConditionTrue, rukpakv1alpha1.ReasonResolved, `to bundle "kube-green.v0.5.2" (version 0.5.2`)
	h.waitBD("kg", rukpakv1alpha1.TypeDeprecated, metav1.ConditionFalse, rukpakv1alpha1.ReasonNotDeprecated, "")

	t.Run("a wider range pivots to the successor the catalog names", func(t *testing.T) {
		h.updateBD("kg", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source.Catalog.Version = "<0.7.0" })
		got := h.waitCatalogInstalled("kg", "0.6.0")
		if r := got.Status.Catalog.Resolved; r == nil || r.Name != "kube-green.v0.6.0" {
			t.Fatalf("resolved %+v", r)
		}
		if got.Status.ActiveBundle == first {
			t.Fatalf("no pivot: active bundle still %s", first)
		}
		eventually(t, "the superseded bundle deleted", func() error {
			_, err := h.getBundle(first)
			return err
		})
		// Resolved again from the installed bundle: the same one.
		h.waitBD("kg", rukpakv1alpha1.TypeResolved, metav1.ConditionTrue, rukpakv1alpha1.ReasonResolved, "(Installed)")
	})

	t.Run("new catalog content re-resolves: deprecations", func(t *testing.T) {
		deprecated := kubeGreen + "\n---\nschema: olm.deprecations\npackage: kube-green\nentries:\n" +
			"- reference: {schema: olm.package}\n  message: kube-green moved to another catalog\n" +
			"- reference: {schema: olm.bundle, name: kube-green.v0.6.0}\n  message: 0.6.0 loses sleep schedules\n"
		h.serveCatalog("operators", deprecated, nil)
		got := h.waitBD("kg", rukpakv1alpha1.TypeBundleDeprecated, metav1.ConditionTrue, rukpakv1alpha1.ReasonDeprecated, `bundle "kube-green.v0.6.0": 0.6.0 loses sleep schedules`)
		for typ, msg := range map[string]string{
			rukpakv1alpha1.TypePackageDeprecated: "kube-green moved to another catalog",
			rukpakv1alpha1.TypeDeprecated:        "package: kube-green moved to another catalog",
		} {
			if c := conditions.Get(got.Status.Conditions, typ); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, msg) {
				t.Fatalf("%s: %+v", typ, c)
			}
		}
		h.waitBD("kg", rukpakv1alpha1.TypeChannelDeprecated, metav1.ConditionFalse, rukpakv1alpha1.ReasonNotDeprecated, "")
		eventually(t, "a warning event for the deprecated bundle", func() error {
			list := &eventsList{}
			return list.find(h, "kg", rukpakv1alpha1.TypeBundleDeprecated, "0.6.0 loses sleep schedules")
		})
	})

	t.Run("a range nothing matches fails and keeps the installed bundle", func(t *testing.T) {
		active := h.bd("kg").Status.ActiveBundle
		h.updateBD("kg", func(bd *rukpakv1alpha1.BundleDeployment) { bd.Spec.Template.Spec.Source.Catalog.Version = ">=9" })
		got := h.waitBD("kg", rukpakv1alpha1.TypeResolved, metav1.ConditionFalse, rukpakv1alpha1.ReasonResolutionFailed,
			`no bundle of package "kube-green" for version range ">=9" in any channel after installed bundle "kube-green.v0.6.0" (version 0.6.0, policy CatalogProvided) (catalog "operators": 10 bundles, 0 in channels and range, 0 of them successors`)
		if c := conditions.Get(got.Status.Conditions, rukpakv1alpha1.TypeResolved); !strings.Contains(c.Message, fmt.Sprintf("bundle %q stays installed", active)) {
			t.Fatalf("message %q", c.Message)
		}
		h.waitBD("kg", rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, active)
		if got := h.bd("kg"); got.Status.ActiveBundle != active || got.Status.Catalog.Installed.Version != "0.6.0" {
			t.Fatalf("active %s, installed %+v", got.Status.ActiveBundle, got.Status.Catalog.Installed)
		}
	})

	t.Run("Manual approval holds the catalog pivot", func(t *testing.T) {
		active := h.bd("kg").Status.ActiveBundle
		h.updateBD("kg", func(bd *rukpakv1alpha1.BundleDeployment) {
			bd.Spec.UpgradeApproval = rukpakv1alpha1.UpgradeApprovalManual
			bd.Spec.Template.Spec.Source.Catalog.Version = "<0.8"
		})
		got := h.waitBD("kg", rukpakv1alpha1.TypePivotPending, metav1.ConditionTrue, rukpakv1alpha1.ReasonAwaitingApproval, "")
		pending := got.Status.PendingBundle
		if got.Status.ActiveBundle != active || got.Status.Catalog.Installed.Version != "0.6.0" || got.Status.Catalog.Resolved.Version != "0.7.0" ||
			got.Status.Catalog.Resolved.Edge != "Replaces" || pending == "" {
			t.Fatalf("while pending: active %s, pending %s, catalog %+v", got.Status.ActiveBundle, pending, got.Status.Catalog)
		}
		testenv.MustNotError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			bd := h.bd("kg")
			if bd.Annotations == nil {
				bd.Annotations = map[string]string{}
			}
			bd.Annotations[rukpakv1alpha1.AnnotationApprovedBundle] = pending
			return h.c.Update(ctx, bd)
		}), "approving %s", pending)
		if got := h.waitCatalogInstalled("kg", "0.7.0"); got.Status.ActiveBundle != pending {
			t.Fatalf("active %s, want the approved %s", got.Status.ActiveBundle, pending)
		}
	})

	t.Run("a selector matching no Catalog fails clearly", func(t *testing.T) {
		bd := catalogBD("kg-nowhere", &rukpakv1alpha1.CatalogSource{PackageName: "kube-green",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "certified"}}}, h.reg.CAPEM)
		testenv.MustNotError(t, h.c.Create(ctx, bd), "creating kg-nowhere")
		h.waitBD("kg-nowhere", rukpakv1alpha1.TypeResolved, metav1.ConditionFalse, rukpakv1alpha1.ReasonResolutionFailed, `no Catalog matches selector "tier=certified"`)
		h.waitBD("kg-nowhere", rukpakv1alpha1.TypeHasValidBundle, metav1.ConditionFalse, rukpakv1alpha1.ReasonResolutionFailed, `no Catalog matches selector "tier=certified"`)

		// A Catalog that comes to match resolves it (installing would
		// collide with kg's CRDs).
		h.serveCatalog("certified", kubeGreen, map[string]string{"tier": "certified"})
		h.waitBD("kg-nowhere", rukpakv1alpha1.TypeResolved, metav1.ConditionTrue, rukpakv1alpha1.ReasonResolved, `to bundle "kube-green.v0.7.1" (version 0.7.1`)
	})

	t.Run("a package document over the bound fails clearly", func(t *testing.T) {
		// A padding property of 600 KB on the first bundle.
		bloated := strings.Replace(kubeGreen, "\nproperties:\n", "\nproperties:\n- type: x.padding\n  value: "+strings.Repeat("x", 600<<10)+"\n", 1)
		h.serveCatalog("bloated", bloated, map[string]string{"tier": "bloated"})
		bd := catalogBD("kg-bloated", &rukpakv1alpha1.CatalogSource{PackageName: "kube-green",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "bloated"}}}, h.reg.CAPEM)
		testenv.MustNotError(t, h.c.Create(ctx, bd), "creating kg-bloated")
		h.waitBD("kg-bloated", rukpakv1alpha1.TypeResolved, metav1.ConditionFalse, rukpakv1alpha1.ReasonResolutionFailed,
			fmt.Sprintf(`reading package "kube-green" of catalog "bloated": package "kube-green": package document too large: over %d bytes`, maxTestPackageBytes))
	})

	t.Run("a Bundle with a catalog source is refused", func(t *testing.T) {
		b := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "from-catalog"}, Spec: rukpakv1alpha1.BundleSpec{
			ProvisionerClassName: rukpakv1alpha1.ProvisionerClassRegistry,
			Source:               rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeCatalog, Catalog: &rukpakv1alpha1.CatalogSource{PackageName: "kube-green"}},
		}}
		err := h.c.Create(ctx, b)
		if err == nil || !strings.Contains(err.Error(), `bundle.spec.source.type "catalog" is for bundle deployment templates only`) {
			t.Fatalf("creating a Bundle with a catalog source: %v", err)
		}
		c := &rukpakv1alpha1.Catalog{ObjectMeta: metav1.ObjectMeta{Name: "from-catalog"}, Spec: rukpakv1alpha1.CatalogSpec{Source: b.Spec.Source}}
		if err := h.c.Create(ctx, c); err == nil || !strings.Contains(err.Error(), `spec.source.type "catalog" is for bundle deployment templates only`) {
			t.Fatalf("creating a Catalog with a catalog source: %v", err)
		}
	})
}

// eventsList finds events of a BundleDeployment.
type eventsList struct{}

func (eventsList) find(h *harness, bd, reason, msgPart string) error {
	list := &corev1.EventList{}
	if err := h.c.List(context.Background(), list); err != nil {
		return err
	}
	var seen []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == bd && e.Reason == reason && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, msgPart) {
			return nil
		}
		seen = append(seen, e.Reason)
	}
	return fmt.Errorf("no %s event among %v", reason, seen)
}
